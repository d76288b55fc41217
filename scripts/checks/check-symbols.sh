#!/usr/bin/env bash
# Link safety of the two CUDA builds. Every kernels/cuda/*.cu file is compiled twice: by nvcc for the
# GPU (namespace cuda) and by g++ against the CPU emulator (namespace cuda_emu), and both land in one
# binary. A name that both builds define (an inline function, a template instantiation) is kept
# once by the linker, so one build would silently run the other's code: a GPU launch going through
# the emulator, an error message from the wrong runtime. This check lists every defined symbol of the
# nvcc objects that another object of the binary (the emulator build, the host libraries) also
# defines, and fails on any that is not one of the by-design shared definitions: the C++ library,
# fmt, and define's own core headers (core/, kernels/tensor_iterator.h), which both compilers build
# from the same source. No GPU needed. Usage:
#   scripts/checks/check-symbols.sh [BUILD_DIR]    (default build/release; needs a DEFINE_CUDA build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build/release}"
nvcc_dir="$build/CMakeFiles/define_kernels_cuda.dir/kernels/cuda"
if [ ! -d "$nvcc_dir" ]; then echo "check-symbols: no nvcc objects in $nvcc_dir (build with DEFINE_CUDA=ON)" >&2; exit 2; fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# The nvcc objects of the current sources (a renamed file leaves a stale object behind).
nvcc_objs=()
for cu in kernels/cuda/*.cu; do
  o="$nvcc_dir/$(basename "$cu").o"
  [ -f "$o" ] || { echo "check-symbols: missing $o (build first)" >&2; exit 2; }
  nvcc_objs+=("$o")
done
# Every other object linked into `define`: the libraries' objects, the emulator build included.
mapfile -t host_objs < <(find "$build/CMakeFiles" "$build/tools/CMakeFiles" -name '*.o' \
  -not -path '*define_kernels_cuda.dir*' \( -path '*define_core.dir*' -o -path '*define_kernels.dir*' \
  -o -path '*define_autograd.dir*' -o -path '*define_nn.dir*' -o -path '*define_models.dir*' \
  -o -path '*define_data.dir*' -o -path '*define_train.dir*' -o -path '*define_cli.dir*' \))
# Keep only objects whose source still exists (stale objects of renamed files are not linked).
live_host=()
for o in "${host_objs[@]}"; do
  rel="${o#*.dir/}"; src="${rel%.o}"
  case "$o" in
    *define_cli.dir/*) src="tools/$src" ;;
    *define_kernels.dir/emu_kernels/*) src="kernels/cuda/$(basename "$src" .cpp).cu" ;;
  esac
  if [ -f "$src" ]; then live_host+=("$o"); fi
done

defined() { nm --defined-only "$@" 2> /dev/null | awk 'NF == 3 && $2 ~ /^[TWVRDBuvi]$/ { print $3 }' | sort -u; }
defined "${nvcc_objs[@]}" > "$tmp/nvcc"
defined "${live_host[@]}" > "$tmp/host"
comm -12 "$tmp/nvcc" "$tmp/host" > "$tmp/shared"

# By-design shared definitions, by demangled name (after an optional return type, which may name a
# define type such as define::BFloat16*): the C++ library, fmt, define's core headers, and the device-memory interface the caching allocator (plain C++,
# kernels/cuda/caching_allocator.h) declares for both builds.
allowed='^((typeinfo|typeinfo name|vtable|guard variable) for )?([A-Za-z0-9_ :*&<>,]+ )?(std::|fmt::|__gnu_cxx::|define::(fail|Error|Tensor|Device|DeviceInterface|Shape|Storage|DType|dtype_name|dtype_size|shape_str|kernels::TensorIterator|cuda::RawDeviceMemory)\b)'
# DW.ref.<symbol>: the exception tables' hidden COMDAT pointer to the personality routine or to the
# typeinfo of a caught standard exception (catch (const std::exception&)): identical in every object.
c++filt < "$tmp/shared" | grep -Ev '^DW\.ref\.(__gxx_personality|_ZTISt|_ZTINSt)' | grep -Ev "$allowed" > "$tmp/bad" || true
shared_count=$(wc -l < "$tmp/shared")
if [ -s "$tmp/bad" ]; then
  echo "check-symbols: defined by the nvcc build and by another object of the binary ($(wc -l < "$tmp/bad") of $shared_count shared):" >&2
  sed 's/^/  /' "$tmp/bad" >&2
  echo "Put such code in the build's own namespace (DEFINE_CUDA_NS: cuda / cuda_emu)." >&2
  exit 1
fi
echo "check-symbols: ${#nvcc_objs[@]} nvcc objects, ${#live_host[@]} host objects: $shared_count shared symbols, all by design (C++ library, fmt, define core)"
