// `elasticdl zoo build|push`: a container image holding a model zoo (seed
// 003: "a Docker image containing the model zoo, ElasticDL and its
// dependencies"), built and pushed with whichever builder the machine has.
//
// The image is `--base_image` (elasticdl on its PATH, with its libraries)
// plus the zoo's sources under /model_zoo and its compiled library at the
// path a job's spec names (the zoo cache's, keyed by the sources' hash), so
// that pods of a job submitted from this machine load it as local
// processes do.
#ifndef ELASTICDL_CLIENT_ZOO_IMAGE_H_
#define ELASTICDL_CLIENT_ZOO_IMAGE_H_

#include <string>

#include "elasticdl/status.h"

namespace elasticdl::client {

struct ZooImageOptions {
  // The zoo: a directory or a Git URL, as --model_zoo takes it.
  std::string model_zoo;
  // The image to build or push, e.g. registry.example/team/zoo:v1.
  std::string image;
  // The image to start from: elasticdl on its PATH.
  std::string base_image;
  // Where the build context goes; empty: a new directory under $TMPDIR.
  std::string context_dir;
  // docker, podman or buildah; empty: the first of them on PATH.
  std::string builder;
};

// The builder to run: `wanted`, or the first of docker, podman and buildah
// on PATH. FAILED_PRECONDITION when there is none.
StatusOr<std::string> FindContainerBuilder(const std::string& wanted);

// Compiles the zoo and writes the build context (Dockerfile, model_zoo/,
// the library); returns its directory.
StatusOr<std::string> WriteZooImageContext(const ZooImageOptions& options);

// Writes the context and builds the image with the builder; an error
// carries the builder's own output, or says that no builder exists and
// where the context is (to build elsewhere).
Status BuildZooImage(const ZooImageOptions& options);

// Pushes the image with the builder.
Status PushZooImage(const ZooImageOptions& options);

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_ZOO_IMAGE_H_
