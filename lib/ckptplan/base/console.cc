#include "ckptplan/base/console.h"

#include <cstdio>
#include <mutex>

#include <spdlog/sinks/base_sink.h>

namespace ckptplan {
namespace {

class PrintableStderrSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    const std::string text = Printable(std::string_view(formatted.data(), formatted.size()));
    std::fwrite(text.data(), 1, text.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

}  // namespace

std::string Printable(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\n' && c != '\t') || byte == 0x7f) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
  }
  return out;
}

std::shared_ptr<spdlog::logger> MakeStderrLogger() {
  auto logger = std::make_shared<spdlog::logger>("ckptplan", std::make_shared<PrintableStderrSink>());
  logger->set_pattern("ckptplan: %l: %v");
  return logger;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace ckptplan
