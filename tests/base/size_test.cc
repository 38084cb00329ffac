#include "ckptplan/base/size.h"

#include <doctest/doctest.h>

#include "ckptplan/base/errors.h"

namespace ckptplan {
namespace {

TEST_CASE("sizes in IEC, SI and plain bytes") {
  CHECK(ParseSize("40GiB", "--budget") == 40LL << 30);
  CHECK(ParseSize("40GB", "--budget") == 40'000'000'000LL);
  CHECK(ParseSize("1.5TiB", "--budget") == 3LL << 39);  // 1.5 x 2^40
  CHECK(ParseSize("512MiB", "--budget") == 512LL << 20);
  CHECK(ParseSize("512 KiB", "--budget") == 512LL << 10);
  CHECK(ParseSize("1024", "--budget") == 1024);
  CHECK(ParseSize("1024B", "--budget") == 1024);
  CHECK(ParseSize("0.5KiB", "--budget") == 512);
  CHECK(ParseSize("9223372036854775807", "--budget") == INT64_MAX);
}

TEST_CASE("bad sizes are usage errors that name the flag") {
  for (const char* text : {"", "GiB", "-1GiB", "12 gigs", "40Gib", "1e9", "8EiB",
                           "9223372036854775808", "1.2.3GB"}) {
    CAPTURE(text);
    try {
      ParseSize(text, "--budget");
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.exit_code() == kExitUsage);
      CHECK(std::string(e.what()).find("--budget") != std::string::npos);
    }
  }
}

TEST_CASE("human sizes use IEC units") {
  CHECK(FormatBytes(100) == "100 B");
  CHECK(FormatBytes(1536) == "1.5 KiB");
  CHECK(FormatBytes(40LL << 30) == "40.0 GiB");
  CHECK(FormatBytes(-2048) == "-2.0 KiB");
}

}  // namespace
}  // namespace ckptplan
