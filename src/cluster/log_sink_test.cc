#include "cluster/log_sink.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "cluster/captured_sink.h"

namespace elasticdl::cluster {
namespace {

TEST(LogSinkTest, LabelsEachLine) {
  CapturedSink out;
  out.sink()->Line("master", "hello");
  out.sink()->Line("ps-0", "one\ntwo\n");
  out.sink()->Line("ps-0", "a\n\nb\r\n");
  out.sink()->Line("w", "");
  EXPECT_EQ(out.Text(),
            "[master] hello\n[ps-0] one\n[ps-0] two\n[ps-0] a\n[ps-0] \n[ps-0] b\n[w] \n");
}

class Recorder : public LineObserver {
 public:
  void BeforeWrite(std::FILE* out) override { std::fputs("<clear>", out); }
  void AfterWrite(std::FILE* out) override { std::fputs("<draw>", out); }
};

TEST(LogSinkTest, ObserverBracketsEachWrite) {
  CapturedSink out;
  Recorder recorder;
  out.sink()->SetObserver(&recorder);
  out.sink()->Line("w", "x\ny");
  out.sink()->Exclusive([](std::FILE* f) { std::fputs("50%", f); });
  out.sink()->SetObserver(nullptr);
  out.sink()->Line("w", "z");
  EXPECT_EQ(out.Text(), "<clear>[w] x\n[w] y\n<draw>50%[w] z\n");
}

TEST(LogSinkTest, ConcurrentLinesStayWhole) {
  CapturedSink out;
  const std::string payload(200, 'p');
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) out.sink()->Line("t" + std::to_string(t), payload);
    });
  }
  for (auto& thread : threads) thread.join();
  std::string text = out.Text();
  size_t lines = 0;
  for (size_t start = 0; start < text.size(); ++lines) {
    size_t end = text.find('\n', start);
    ASSERT_NE(end, std::string::npos);
    std::string line = text.substr(start, end - start);
    ASSERT_EQ(line.size(), 5 + payload.size()) << line;
    ASSERT_EQ(line.substr(4), " " + payload);
    start = end + 1;
  }
  EXPECT_EQ(lines, 2000u);
}

TEST(LineWriterTest, AssemblesLinesAcrossChunks) {
  CapturedSink out;
  LineWriter writer(out.sink(), "w");
  writer.Append("par");
  writer.Append("tial\nsecond\n\nthi");
  EXPECT_EQ(out.Text(), "[w] partial\n[w] second\n[w] \n");
  writer.Append("rd");
  writer.Flush();
  writer.Flush();
  EXPECT_EQ(out.Text(), "[w] partial\n[w] second\n[w] \n[w] third\n");
}

TEST(LineWriterTest, SplitsLongLinesBetweenCharacters) {
  CapturedSink out;
  LineWriter writer(out.sink(), "w");
  std::string line = "a";
  for (int i = 0; i < 20000; ++i) line += "\xC3\xA9";  // é: cutting at an even offset splits it
  for (size_t i = 0; i < line.size(); i += 1000) writer.Append(line.substr(i, 1000));
  writer.Append("\n");
  std::string text = out.Text();
  std::string joined;
  int pieces = 0;
  for (size_t start = 0; start < text.size(); ++pieces) {
    size_t end = text.find('\n', start);
    ASSERT_EQ(text.compare(start, 4, "[w] "), 0);
    std::string piece = text.substr(start + 4, end - start - 4);
    EXPECT_LE(piece.size(), LogSink::kMaxLineBytes);
    EXPECT_NE(static_cast<unsigned char>(piece[0]) & 0xC0, 0x80) << "piece " << pieces;
    joined += piece;
    start = end + 1;
  }
  EXPECT_EQ(pieces, 3);
  EXPECT_EQ(joined, line);
}

}  // namespace
}  // namespace elasticdl::cluster
