// Fuzzes the RecordIO payload decoders (common/compression.h): snappy framing
// and gzip.
//
// Input: the bytes to decode followed by three control bytes
// (FuzzedDataProvider takes them from the end): flags, then a 16-bit seed m
// for max_output (m * 16 bytes, or unbounded when m is 0xffff). Flag bits:
//   bit 0  decode as gzip rather than snappy framing;
//   bit 1  repair the snappy frame checksums first, so mutations reach the
//          code behind them.
// Properties of decoding arbitrary bytes (into an `out` that already holds
// something): what `out` held stays, and on error it is all `out` holds; `out`
// grows by at most max_output; errors are DATA_LOSS; a successful decode of P
// bytes succeeds again, identically, with max_output = P and fails with P - 1.
// Round trips on the same bytes: SnappyFramedCompress and GzipCompress (two
// concatenated gzip members, split where m says) decode back to them, and not
// within one byte less.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "checksum_fixup.h"
#include "common/compression.h"
#include "fuzz_check.h"
#include "seed_mode.h"

namespace elasticdl::fuzz {
namespace {

using Decoder = Status (*)(std::string_view, size_t, std::string*);

constexpr std::string_view kPrefix = "kept";

// Decodes with `max_output`, appending to kPrefix, and checks what must always
// hold; leaves only the decoded bytes in `out`.
Status Decode(Decoder decode, std::string_view input, size_t max_output, std::string* out) {
  out->assign(kPrefix);
  Status s = decode(input, max_output, out);
  EDL_FUZZ_CHECK(std::string_view(*out).substr(0, kPrefix.size()) == kPrefix,
                 "the decoder changed what `out` held before");
  EDL_FUZZ_CHECK(out->size() - kPrefix.size() <= max_output,
                 "decoded {} bytes with max_output {} ({})", out->size() - kPrefix.size(),
                 max_output, s.ToString());
  if (!s.ok()) {
    EDL_FUZZ_CHECK(s.code() == StatusCode::kDataLoss, "decoder failed with {}, expected DATA_LOSS",
                   s.ToString());
    EDL_FUZZ_CHECK(out->size() == kPrefix.size(), "failed ({}) but left {} bytes in `out`",
                   s.ToString(), out->size() - kPrefix.size());
  }
  out->erase(0, kPrefix.size());
  return s;
}

// Decoding `input` gave `decoded`: the limit must be exactly tight.
void CheckLimitIsTight(Decoder decode, std::string_view input, const std::string& decoded) {
  std::string again;
  Status s = Decode(decode, input, decoded.size(), &again);
  EDL_FUZZ_CHECK(s.ok() && again == decoded,
                 "decoded {} bytes, but not again with max_output = {}: {}", decoded.size(),
                 decoded.size(), s.ToString());
  if (decoded.empty()) return;
  s = Decode(decode, input, decoded.size() - 1, &again);
  EDL_FUZZ_CHECK(!s.ok(), "decoded {} bytes, yet succeeded with max_output = {}", decoded.size(),
                 decoded.size() - 1);
}

void RoundTrips(std::string_view data, uint16_t seed) {
  std::string compressed, decoded;
  compression::SnappyFramedCompress(data, &compressed);
  Status s = Decode(&compression::SnappyFramedUncompress, compressed, data.size(), &decoded);
  EDL_FUZZ_CHECK(s.ok() && decoded == data, "snappy round trip of {} bytes: {}", data.size(),
                 s.ToString());
  CheckLimitIsTight(&compression::SnappyFramedUncompress, compressed, decoded);

  compressed.clear();
  const size_t split = seed % (data.size() + 1);
  s = compression::GzipCompress(data.substr(0, split), &compressed);
  EDL_FUZZ_CHECK(s.ok(), "GzipCompress: {}", s.ToString());
  s = compression::GzipCompress(data.substr(split), &compressed);
  EDL_FUZZ_CHECK(s.ok(), "GzipCompress: {}", s.ToString());
  s = Decode(&compression::GzipUncompress, compressed, data.size(), &decoded);
  EDL_FUZZ_CHECK(s.ok() && decoded == data, "gzip round trip of {} bytes split at {}: {}",
                 data.size(), split, s.ToString());
  CheckLimitIsTight(&compression::GzipUncompress, compressed, decoded);
}

std::string WithControls(std::string input, uint8_t flags, uint16_t seed) {
  // FuzzedDataProvider reads integers from the end, last byte first.
  input.push_back(static_cast<char>(seed >> 8));
  input.push_back(static_cast<char>(seed & 0xff));
  input.push_back(static_cast<char>(flags));
  return input;
}

Status WriteSeeds(const std::string& dir) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the quick brown fox jumps over the lazy dog ";
  const std::string binary("\x00\x01\x02\x03\xfe\xff\x80\x7f", 8);

  std::string snappy;
  compression::SnappyFramedCompress(text, &snappy);
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "snappy_text", WithControls(snappy, 2, 0xffff)));
  snappy.clear();
  compression::SnappyFramedCompress(binary, &snappy);  // stored uncompressed
  snappy.append("\xfe\x02\x00\x00pp", 6);              // padding chunk
  snappy.append("\x80\x01\x00\x00s", 5);               // skippable chunk
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "snappy_binary", WithControls(snappy, 2, 0x0100)));

  std::string gzip;
  EDL_RETURN_IF_ERROR(compression::GzipCompress(text, &gzip));
  EDL_RETURN_IF_ERROR(compression::GzipCompress(binary, &gzip));  // a second member
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "gzip_two_members", WithControls(gzip, 1, 0xffff)));
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "empty", WithControls("", 0, 0)));
  return absl::OkStatus();
}

}  // namespace
}  // namespace elasticdl::fuzz

EDL_FUZZ_SEED_WRITER(&elasticdl::fuzz::WriteSeeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace elasticdl;
  using namespace elasticdl::fuzz;
  FuzzedDataProvider in(data, size);
  const auto flags = in.ConsumeIntegral<uint8_t>();
  const auto seed = in.ConsumeIntegral<uint16_t>();
  std::string input = in.ConsumeRemainingBytesAsString();
  const size_t max_output = seed == 0xffff ? std::numeric_limits<size_t>::max() : size_t{seed} * 16;

  Decoder decode = &compression::SnappyFramedUncompress;
  std::string to_decode = input;
  if (flags & 1) {
    decode = &compression::GzipUncompress;
  } else if (flags & 2) {
    FixSnappyFramedChecksums(&to_decode);
  }
  std::string decoded;
  if (Decode(decode, to_decode, max_output, &decoded).ok()) {
    CheckLimitIsTight(decode, to_decode, decoded);
  }
  RoundTrips(input, seed);
  return 0;
}
