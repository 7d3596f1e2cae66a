// The unit of edl_zoo_pch, whose precompiled LibTorch header the zoo builds
// of the build tree's ElasticDL package include (cmake/Package.cmake).
