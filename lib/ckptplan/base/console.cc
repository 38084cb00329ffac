#include "ckptplan/base/console.h"

#include <cstdio>
#include <mutex>

#include <spdlog/sinks/base_sink.h>

#include "ckptplan/base/text_escape.h"

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

std::string Printable(std::string_view text) { return EscapeControls(text); }

std::shared_ptr<spdlog::logger> MakeStderrLogger() {
  auto logger = std::make_shared<spdlog::logger>("ckptplan", std::make_shared<PrintableStderrSink>());
  logger->set_pattern("ckptplan: %l: %v");
  return logger;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace ckptplan
