// Fuzz target: the safetensors reader (nn/safetensors.h: `define import`, token caches) and the
// checkpoint reader on top of it (nn/checkpoint.h: --resume, eval, generate, export).
//
// Input: the bytes of a file. The readers take paths, so the bytes go to a scratch file first.
// Every accepted file is checked: each tensor's byte count agrees with its shape and dtype.
// Expected outcomes and findings: tests/fuzz/fuzz_util.h.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "nn/checkpoint.h"
#include "nn/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path =
      define::fuzz::write_scratch("file.safetensors", std::string_view(reinterpret_cast<const char*>(data), size));
  define::nn::SafetensorsContents file;
  if (!define::fuzz::expect_define_error([&] { file = define::nn::load_safetensors(path); })) return 0;
  std::uint64_t bytes = 0;
  for (const auto& [name, t] : file.tensors) {
    define::fuzz::check(t.device().is_cpu() && t.is_contiguous(), "a loaded tensor is not a contiguous CPU tensor");
    bytes += static_cast<std::uint64_t>(t.numel()) * define::dtype_size(t.dtype());
  }
  define::fuzz::check(bytes <= size, "the loaded tensors hold more bytes than the file");
  define::fuzz::expect_define_error([&] { define::nn::load_checkpoint(path); });
  return 0;
}
