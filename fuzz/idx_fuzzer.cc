// Fuzzes the IDX reader behind `elasticdl data mnist` (data/mnist_import.h).
//
// Input: the decompressed bytes of an IDX file; the first byte picks the
// number of dimensions asked for (1 for labels, 3 for images). ParseIdx must
// either fail with DATA_LOSS or return dimensions whose product is exactly the
// data after the header; 28x28 images must then turn into Examples that
// decode to 784 floats.
#include <cstdint>
#include <string>

#include "data/example_wire.h"
#include "data/mnist_import.h"
#include "fuzz_check.h"
#include "seed_mode.h"

namespace elasticdl::fuzz {
namespace {

std::string Header(uint32_t ndims, std::initializer_list<uint32_t> dims) {
  std::string h = {0, 0, 8, static_cast<char>(ndims)};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) h.push_back(static_cast<char>(d >> shift));
  }
  return h;
}

Status WriteSeeds(const std::string& dir) {
  std::string images = std::string(1, 3) + Header(3, {2, 28, 28}) + std::string(2 * 784, '\x7f');
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "images", images));
  std::string labels = std::string(1, 1) + Header(1, {3}) + std::string("\x01\x02\x09", 3);
  return WriteSeed(dir, "labels", labels);
}

}  // namespace
}  // namespace elasticdl::fuzz

EDL_FUZZ_SEED_WRITER(&elasticdl::fuzz::WriteSeeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace elasticdl;
  if (size < 1) return 0;
  const uint32_t want_dims = data[0] % 2 == 0 ? 1 : 3;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  StatusOr<Idx> idx = ParseIdx("fuzz.idx", bytes, want_dims);
  if (!idx.ok()) {
    EDL_FUZZ_CHECK(idx.status().code() == StatusCode::kDataLoss, "unexpected status {}",
                   idx.status().ToString());
    return 0;
  }
  EDL_FUZZ_CHECK(idx->dims.size() == want_dims, "{} dims, asked for {}", idx->dims.size(),
                 want_dims);
  uint64_t count = 1;
  for (uint32_t d : idx->dims) count *= d;
  EDL_FUZZ_CHECK(idx->data.size() - idx->header_size == count,
                 "data holds {} bytes, dimensions promise {}", idx->data.size() - idx->header_size,
                 count);
  if (want_dims == 3 && idx->dims[1] == 28 && idx->dims[2] == 28) {
    const auto* pixels = reinterpret_cast<const uint8_t*>(idx->data.data() + idx->header_size);
    for (uint32_t i = 0; i < idx->dims[0] && i < 4; ++i) {
      std::string record = MnistExample(pixels + i * 784, i);
      std::vector<example::DecodedFeature> features;
      EDL_FUZZ_CHECK(example::DecodeAll(record, &features).ok(), "image {} does not decode", i);
      EDL_FUZZ_CHECK(features.size() == 2 && features[0].floats.size() == 784,
                     "image {} decodes to the wrong shape", i);
    }
  }
  return 0;
}
