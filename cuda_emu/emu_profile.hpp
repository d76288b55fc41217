// CUDA execution emulator: the profiling mode. What a launch does to memory, as a GPU's memory
// system would see it, so that a kernel's access pattern can be judged without a GPU.
//
// The emulated kernels are compiled with ThreadSanitizer's instrumentation (emu_race.hpp), so every
// load, store and atomic of every emulated thread calls the emulator with its address, its size
// and the instruction that made it (the hook's return address). In profiling mode the block's
// runner records each access to global or shared memory with the thread that made it and how many
// times that thread had executed that instruction before. When the block ends, the accesses are
// grouped into warp-level requests as SIMT hardware issues them: the n-th execution of one
// instruction by the lanes of one warp is one request (where the warp converges, at a full-warp
// collective or a barrier, the lanes' counts are aligned: Runner::align_executions). From the requests:
//   * global memory: the 32-byte sectors each request touches and the bytes its lanes asked for
//     (ncu: l1tex__t_sectors_pipe_lsu_mem_global_op_{ld,st}.sum and the sector efficiency
//     smsp__sass_average_data_bytes_per_sector_mem_global_op_{ld,st}.pct), and the distinct sectors
//     of the launch: the DRAM traffic if the L2 kept everything the launch touched once
//     (dram__bytes_{read,write}.sum, a lower bound), and the load sectors a block had read before,
//     which its multiprocessor's L1 serves;
//   * shared memory: wavefronts per request from the 32 four-byte banks (a request whose lanes
//     hit different words of one bank takes as many wavefronts as that bank has words; lanes
//     reading one word share it; 8- and 16-byte accesses are split into half- and quarter-warp
//     phases as the hardware does), against the wavefronts without conflicts
//     (l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum,
//     l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum);
//   * active lanes per memory instruction (smsp__thread_inst_executed_per_inst_executed.ratio,
//     counted over memory instructions only).
// The emulator cannot see registers or scalar arithmetic: the register count of a kernel comes from
// ptxas (scripts/checks/check-ptxas.sh) and its FP32 FLOPs from the caller. The matrix instructions
// (mma.sync) are warp collectives it executes itself, so their FLOPs are counted here.
// emu_perf_model.hpp turns all of these into a time estimate per target GPU.
//
// Approximations, stated where they apply: g++ compiles a thread's code, not nvcc, so it may merge
// or split a thread's accesses differently. A vectorised loop of one thread becomes one wide
// access. A copy of an aligned structure becomes its fields, which the recorder merges back into
// one access (up to 16 bytes) when they follow each other from an address aligned to their total
// size, as nvcc's 64- or 128-bit access of a type aligned to its size; a thread's loop over
// contiguous floats from such an address is merged the same way, where nvcc may not vectorise it,
// and a structure aligned to less than its size (two floats aligned to 4, 12 bytes aligned to 4)
// is merged wherever it happens to start at a boundary of its size, where nvcc never merges (so
// the bank conflicts of its separate 4-byte accesses may go unseen). A profiled launch runs its blocks one at a time on
// the calling thread in index order; accesses are grouped per block, so a grid large enough to take long is profiled on
// an evenly spaced sample of its blocks (`ProfileSettings::max_blocks`) and the counts scaled to the grid.
#pragma once

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cuda_emu/emu_memory.hpp"
#include "cuda_emu/emu_types.hpp"

namespace cuda_emu {

// Counts of one kind of memory instruction over a launch (scaled to the whole grid when a sample
// of its blocks was recorded).
struct AccessCounts {
  double requests = 0;  // warp-level instructions
  double lanes = 0;     // active lanes, summed over the requests
  double bytes = 0;     // distinct bytes the lanes of each request asked for, summed
  double sectors = 0;   // global: 32-byte sectors the requests touched; shared: wavefronts
  double ideal = 0;     // global: sectors if every request were perfectly packed; shared: wavefronts without conflicts
  // Sector efficiency (global) or conflict-free share (shared), 1 when there is nothing to judge.
  double efficiency(bool shared) const {
    if (sectors <= 0) return 1.0;
    return shared ? ideal / sectors : bytes / (32.0 * sectors);
  }
  AccessCounts& operator+=(const AccessCounts& o) {
    requests += o.requests;
    lanes += o.lanes;
    bytes += o.bytes;
    sectors += o.sectors;
    ideal += o.ideal;
    return *this;
  }
};

// One launch's profile.
struct KernelProfile {
  std::string kernel;  // demangled name, namespace and parameters dropped ("reduce_rows_kernel<...>")
  const void* function = nullptr;
  dim3 grid{1, 1, 1}, block{1, 1, 1};
  std::size_t dynamic_smem = 0, static_smem = 0;  // bytes per block
  std::uint64_t blocks = 0, profiled_blocks = 0;
  AccessCounts global_load, global_store, global_atomic;
  AccessCounts shared_load, shared_store, shared_atomic;
  // Distinct sectors x 32 (an L2 that holds the launch); from a sample of the blocks, scaled to the
  // grid with no allocation counted for more than its size.
  double dram_read_bytes = 0, dram_write_bytes = 0;
  // Sectors of global loads (not cp.async copies) that their block had read before: served by the
  // multiprocessor's L1 rather than moved from L2 again (a row kernel re-reading its weights for
  // every row). Within a block only, as if its L1 held what the block re-reads.
  double l1_hit_sectors = 0;
  int load_instructions = 0;  // distinct global load instructions
  // Global loads a thread issues before it executes one of them again, on average: the loads of
  // one loop iteration, which nothing orders (a loop with one load: 1; unrolled by four: 4; two
  // loops one after the other: 1); cp.async copies (sm_80 and newer) from one wait of the thread to
  // the next, whatever loop issued them. How many a thread can have in flight.
  double loads_in_flight = 1;
  // Multiply-add FLOPs of the warp-level matrix instructions (mma.sync: 2 M N K each), which run on
  // the tensor cores; the emulator counts these, unlike the threads' scalar arithmetic.
  double tensor_flops = 0;

  std::uint64_t threads_per_block() const { return std::uint64_t(block.x) * block.y * block.z; }
  double total_global_bytes() const { return global_load.bytes + global_store.bytes + global_atomic.bytes; }
};

struct ProfileSettings {
  std::uint64_t max_blocks = 4096;  // blocks recorded per launch; larger grids are sampled evenly
};

namespace detail {

// What a recorded access was.
// kAsync marks the two sides of a cp.async: its global read, when the thread issues it, and its shared
// write, when the thread's wait lands it (emu_async_copy.hpp).
enum AccessKind : std::uint8_t { kRead = 0, kWrite = 1, kAtomic = 2, kShared = 4, kAsync = 8 };

struct RecordedAccess {
  const void* pc;  // the instruction (the instrumentation hook's return address)
  std::uintptr_t address;
  std::uint32_t instance;  // this thread's how-many-th execution of the instruction
  std::uint32_t bytes;
  std::uint16_t thread;  // linear index in the block
  std::uint8_t kind;
};

// Shared-memory wavefronts of one request: lanes are served in phases (32 lanes for accesses of
// at most 4 bytes, 16 for 8 bytes, 8 for 16 bytes), and a phase takes as many wavefronts as the
// busiest of the 32 four-byte banks has distinct words.
inline std::pair<double, double> shared_wavefronts(const RecordedAccess* a, std::size_t n) {
  double wavefronts = 0, ideal = 0;
  const std::uint32_t width = std::max<std::uint32_t>(4, a[0].bytes);
  const int lanes_per_phase = width >= 16 ? 8 : (width >= 8 ? 16 : 32);
  for (int phase = 0; phase < 32 / lanes_per_phase; ++phase) {
    std::vector<std::uintptr_t> words;
    for (std::size_t i = 0; i < n; ++i) {
      const int lane = a[i].thread & 31;
      if (lane / lanes_per_phase != phase) continue;
      const std::uintptr_t first = a[i].address >> 2,
                           last = (a[i].address + std::max<std::uint32_t>(a[i].bytes, 1) - 1) >> 2;
      for (std::uintptr_t w = first; w <= last; ++w) words.push_back(w);
    }
    if (words.empty()) continue;
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    int per_bank[32] = {};
    int busiest = 0;
    for (const std::uintptr_t w : words) busiest = std::max(busiest, ++per_bank[w & 31]);
    wavefronts += busiest;
    ideal += double((words.size() + 31) / 32);
  }
  return {wavefronts, ideal};
}

// Distinct bytes of a request (lanes reading the same address share it).
inline double distinct_bytes(const RecordedAccess* a, std::size_t n,
                             std::vector<std::pair<std::uintptr_t, std::uintptr_t>>& ranges) {
  ranges.clear();
  for (std::size_t i = 0; i < n; ++i) ranges.emplace_back(a[i].address, a[i].address + a[i].bytes);
  std::sort(ranges.begin(), ranges.end());
  double total = 0;
  std::uintptr_t end = 0;
  for (const auto& [lo, hi] : ranges) {
    const std::uintptr_t from = std::max(lo, end);
    if (hi > from) total += double(hi - from);
    end = std::max(end, hi);
  }
  return total;
}

// The kernel's name from the symbol table of the object that holds it: the dynamic symbols through
// dladdr, else the full table (.symtab) of the file, which has the local symbols (kernels in an
// anonymous namespace) too. Demangled and shortened to what scripts/checks/check-ptxas.sh prints
// for the same kernel under nvcc ("reduce_rows_kernel<define::kernels::cuda::SumOp<...> >"), so the
// two can be joined. "?" when the object has no symbol table (stripped).
inline std::string symbol_of(const void* fn) {
  Dl_info info{};
  if (!dladdr(fn, &info)) return {};
  if (info.dli_sname && info.dli_saddr == fn) return info.dli_sname;
  if (!info.dli_fname) return {};
  const int fd = ::open(info.dli_fname, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  std::string found;
  if (::fstat(fd, &st) == 0 && std::size_t(st.st_size) > sizeof(Elf64_Ehdr)) {
    const std::size_t size = std::size_t(st.st_size);
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
      const auto* base = static_cast<const unsigned char*>(map);
      const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
      const bool elf64 = std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64;
      if (elf64 && eh->e_shoff + std::size_t(eh->e_shnum) * sizeof(Elf64_Shdr) <= size) {
        const auto* sh = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
        // Symbol values of a position-independent object are relative to its load address.
        const std::uintptr_t want = reinterpret_cast<std::uintptr_t>(fn) -
                                    (eh->e_type == ET_DYN ? reinterpret_cast<std::uintptr_t>(info.dli_fbase) : 0);
        for (int i = 0; i < eh->e_shnum && found.empty(); ++i) {
          if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
          const Elf64_Shdr& strtab = sh[sh[i].sh_link];
          if (sh[i].sh_offset + sh[i].sh_size > size || strtab.sh_offset + strtab.sh_size > size) continue;
          const auto* syms = reinterpret_cast<const Elf64_Sym*>(base + sh[i].sh_offset);
          const std::size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
          for (std::size_t k = 0; k < n; ++k) {
            if (ELF64_ST_TYPE(syms[k].st_info) != STT_FUNC || syms[k].st_value != want) continue;
            if (syms[k].st_name >= strtab.sh_size) continue;
            found = reinterpret_cast<const char*>(base + strtab.sh_offset + syms[k].st_name);
            break;
          }
        }
      }
      ::munmap(map, size);
    }
  }
  ::close(fd);
  return found;
}

// "void define::kernels::cuda_emu::(anonymous namespace)::k<define::kernels::cuda_emu::Op>(float*)"
// -> "k<define::kernels::cuda::Op>": check-ptxas.sh's form of the nvcc build's name.
inline std::string short_kernel_name(const std::string& mangled) {
  if (mangled.empty()) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  std::string s = (status == 0 && d) ? d : mangled;
  std::free(d);
  auto replace_all = [&s](const std::string& from, const std::string& to) {
    for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  };
  replace_all("define::kernels::cuda_emu::", "define::kernels::cuda::");
  replace_all("(anonymous namespace)::", "");
  // Drop the parameter list: the last parenthesis group outside template arguments.
  int depth = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<')
      ++depth;
    else if (s[i] == '>')
      --depth;
    else if (s[i] == '(' && depth == 0 && i > 0) {
      s.resize(i);
      break;
    }
  }
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  const std::string prefix = "define::kernels::cuda::";
  if (s.rfind(prefix, 0) == 0) s.erase(0, prefix.size());
  return s;
}

inline std::string kernel_name(const void* fn) {
  static std::mutex mu;
  static std::map<const void*, std::string>* names = new std::map<const void*, std::string>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = names->find(fn);
  if (it == names->end()) it = names->emplace(fn, short_kernel_name(symbol_of(fn))).first;
  return it->second;
}

// The profile of the launch being recorded: what each block adds.
class LaunchRecorder {
 public:
  KernelProfile profile;
  double block_weight = 1;  // grid blocks each recorded block stands for

  // Adds one block's accesses (sorted here).
  void add_block(std::vector<RecordedAccess>& acc) {
    count_load_windows(acc);
    block_reads_.clear();
    std::sort(acc.begin(), acc.end(), [](const RecordedAccess& x, const RecordedAccess& y) {
      if (x.pc != y.pc) return x.pc < y.pc;
      if (x.instance != y.instance) return x.instance < y.instance;
      if ((x.thread >> 5) != (y.thread >> 5)) return (x.thread >> 5) < (y.thread >> 5);
      return x.thread < y.thread;
    });
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
    std::vector<std::uintptr_t> sectors;
    for (std::size_t i = 0; i < acc.size();) {
      std::size_t j = i + 1;
      while (j < acc.size() && acc[j].pc == acc[i].pc && acc[j].instance == acc[i].instance &&
             (acc[j].thread >> 5) == (acc[i].thread >> 5))
        ++j;
      add_request(&acc[i], j - i, ranges, sectors);
      i = j;
    }
    ++profile.profiled_blocks;
  }

  void finish() {
    profile.dram_read_bytes = distinct_bytes_scaled(read_sectors_);
    profile.dram_write_bytes = distinct_bytes_scaled(write_sectors_);
    profile.load_instructions = int(load_pcs_.size());
    profile.loads_in_flight = windows_ > 0 ? std::clamp(window_loads_ / windows_, 1.0, 8.0) : 1.0;
  }

 private:
  // The bytes of distinct sectors, scaled to the grid. A sample of the blocks stands for the others
  // by block_weight, but what every block reads alike (the keys and values each query block of an
  // attention kernel reads) is no new traffic for the blocks not recorded: no device allocation
  // counts for more than its own sectors.
  double distinct_bytes_scaled(const std::unordered_set<std::uintptr_t>& set) const {
    if (block_weight == 1) return 32.0 * double(set.size());
    std::vector<std::uintptr_t> sectors(set.begin(), set.end());
    std::sort(sectors.begin(), sectors.end());
    double bytes = 0;
    for (std::size_t i = 0; i < sectors.size();) {
      std::uintptr_t lo = 0, hi = 0;
      const std::uintptr_t first = sectors[i] << 5;
      std::size_t j = i + 1;
      if (detail::device_block_of(reinterpret_cast<const void*>(first), lo, hi) ||
          detail::device_block_of(reinterpret_cast<const void*>(first + 31), lo, hi)) {
        while (j < sectors.size() && (sectors[j] << 5) < hi) ++j;
        const double allocation = 32.0 * double(((hi - 1) >> 5) - (lo >> 5) + 1);
        bytes += std::min(32.0 * double(j - i) * block_weight, allocation);
      } else {
        bytes += 32.0 * block_weight;  // not in a live allocation (freed since): scaled as it is
      }
      i = j;
    }
    return bytes;
  }

  // Splits each thread's global loads, in the order it made them (the recording keeps each thread's
  // order), into windows that end where an instruction repeats: a window's loads have no load of
  // the same instruction between them, as one loop iteration's. A thread does not wait for its
  // cp.async copies until its wait lands them, so those form windows of their own that end at the
  // wait: every copy issued before it was in flight at once, whatever loop issued them.
  void count_load_windows(const std::vector<RecordedAccess>& acc) {
    struct Window {
      const void* pcs[8];
      int n = 0;
    };
    std::unordered_map<std::uint16_t, Window> open;
    std::unordered_map<std::uint16_t, int> copies;  // a thread's cp.async reads since its last landing
    for (const RecordedAccess& a : acc) {
      if (a.kind == (kRead | kAsync)) {
        ++copies[a.thread];
        continue;
      }
      if (a.kind & kAsync) {  // a landing: the thread's wait
        int& n = copies[a.thread];
        if (n > 0) {
          window_loads_ += n;
          windows_ += 1;
          n = 0;
        }
        continue;
      }
      if (a.kind != kRead) continue;  // global loads only
      Window& w = open[a.thread];
      bool repeat = w.n == 8;
      for (int i = 0; i < w.n && !repeat; ++i) repeat = w.pcs[i] == a.pc;
      if (repeat) {
        window_loads_ += w.n;
        windows_ += 1;
        w.n = 0;
      }
      w.pcs[w.n++] = a.pc;
    }
    for (const auto& [thread, w] : open) {
      window_loads_ += w.n;
      windows_ += 1;
    }
    for (const auto& [thread, n] : copies) {  // never waited for (a bug the launch reports elsewhere)
      if (n == 0) continue;
      window_loads_ += n;
      windows_ += 1;
    }
  }

  void add_request(const RecordedAccess* a, std::size_t n,
                   std::vector<std::pair<std::uintptr_t, std::uintptr_t>>& ranges,
                   std::vector<std::uintptr_t>& sectors) {
    const std::uint8_t kind = a[0].kind;
    const bool shared = kind & kShared;
    AccessCounts& c =
        shared
            ? (kind & kAtomic ? profile.shared_atomic : (kind & kWrite ? profile.shared_store : profile.shared_load))
            : (kind & kAtomic ? profile.global_atomic : (kind & kWrite ? profile.global_store : profile.global_load));
    const double w = block_weight;
    const double bytes = distinct_bytes(a, n, ranges);
    c.requests += w;
    c.lanes += w * double(n);
    c.bytes += w * bytes;
    if (shared) {
      const auto [wavefronts, ideal] = shared_wavefronts(a, n);
      c.sectors += w * wavefronts;
      c.ideal += w * ideal;
      return;
    }
    sectors.clear();
    for (std::size_t i = 0; i < n; ++i) {
      const std::uintptr_t bytes_i = std::max<std::uint32_t>(a[i].bytes, 1);
      for (std::uintptr_t s = a[i].address >> 5; s <= (a[i].address + bytes_i - 1) >> 5; ++s) sectors.push_back(s);
    }
    std::sort(sectors.begin(), sectors.end());
    sectors.erase(std::unique(sectors.begin(), sectors.end()), sectors.end());
    c.sectors += w * double(sectors.size());
    c.ideal += w * std::ceil(bytes / 32.0);
    auto& distinct = (kind & (kWrite | kAtomic)) ? write_sectors_ : read_sectors_;
    distinct.insert(sectors.begin(), sectors.end());
    if (kind & kAtomic) read_sectors_.insert(sectors.begin(), sectors.end());  // an atomic reads and writes
    if (!(kind & (kWrite | kAtomic))) load_pcs_.insert(a[0].pc);
    if (kind == kRead) {  // a plain load: sectors its block read before hit the L1
      double hits = 0;
      for (const std::uintptr_t s : sectors) hits += block_reads_.insert(s).second ? 0 : 1;
      profile.l1_hit_sectors += w * hits;
    }
  }

  std::unordered_set<std::uintptr_t> read_sectors_, write_sectors_;
  std::unordered_set<std::uintptr_t> block_reads_;  // sectors the current block has loaded
  std::unordered_set<const void*> load_pcs_;
  double window_loads_ = 0, windows_ = 0;
};

// The process-wide profiler: on between profile_start() and profile_stop(), one launch at a time.
struct Profiler {
  std::mutex mu;
  bool on = false;
  ProfileSettings settings;
  std::vector<KernelProfile> launches;
  LaunchRecorder* current = nullptr;
};

inline Profiler& profiler() {
  static Profiler* p = new Profiler();  // leaked: launches may run during static destruction
  return *p;
}

}  // namespace detail

// Starts recording a profile of every launch (of any device) until profile_stop(). While it is on,
// launches run their blocks on the calling thread (one at a time, in index order) and are slower.
inline void profile_start(ProfileSettings settings = {}) {
  detail::Profiler& p = detail::profiler();
  std::lock_guard<std::mutex> lock(p.mu);
  p.on = true;
  p.settings = settings;
  p.launches.clear();
}

// Stops recording and returns the profiles of the launches since profile_start(), in launch order.
inline std::vector<KernelProfile> profile_stop() {
  detail::Profiler& p = detail::profiler();
  std::lock_guard<std::mutex> lock(p.mu);
  p.on = false;
  return std::exchange(p.launches, {});
}

inline bool profiling() {
  detail::Profiler& p = detail::profiler();
  std::lock_guard<std::mutex> lock(p.mu);
  return p.on;
}

}  // namespace cuda_emu
