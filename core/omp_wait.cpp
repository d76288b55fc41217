#include "core/omp_wait.h"

#include <limits.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace define {

namespace {

// The CPUs of a Linux CPU list ("0-3,8,10-11"); nothing when it does not parse.
std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty()) continue;
    int first = 0, last = 0;
    char dash = 0;
    std::stringstream range(part);
    if (!(range >> first)) return {};
    last = first;
    if (range >> dash) {
      if (dash != '-' || !(range >> last) || last < first) return {};
    }
    for (int c = first; c <= last; ++c) cpus.push_back(c);
  }
  return cpus;
}

// Whether an MPI launcher started other ranks on this machine (Open MPI's and MPICH's local sizes):
// their threads may then outnumber the cores, where a spinning worker would hold a core another
// process needs.
bool ranks_share_the_machine() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    const char* v = std::getenv(name);
    if (v && std::atoi(v) > 1) return true;
  }
  return false;
}

}  // namespace

bool cpus_share_a_core(const std::vector<int>& cpus, const std::function<std::string(int)>& siblings_list) {
  for (int cpu : cpus) {
    const std::vector<int> siblings = parse_cpu_list(siblings_list(cpu));
    if (std::find(siblings.begin(), siblings.end(), cpu) == siblings.end()) return true;  // unreadable
    for (int s : siblings)
      if (s != cpu && std::find(cpus.begin(), cpus.end(), s) != cpus.end()) return true;
  }
  return false;
}

bool process_cpus_share_a_core() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return true;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus_share_a_core(cpus, [](int cpu) {
    std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
    std::string line;
    std::getline(f, line);
    return line;
  });
}

void prefer_passive_omp_wait(char** argv, const std::vector<std::pair<std::string, std::string>>& more) {
  std::vector<std::pair<std::string, std::string>> wanted;
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    wanted.emplace_back("OMP_WAIT_POLICY", "PASSIVE");
    if (std::getenv("GOMP_SPINCOUNT") == nullptr && !ranks_share_the_machine() && !process_cpus_share_a_core())
      wanted.emplace_back("GOMP_SPINCOUNT", kShortSpinCount);
  }
  for (const auto& [name, value] : more)
    if (!value.empty() && std::getenv(name.c_str()) == nullptr) wanted.emplace_back(name, value);
  if (wanted.empty()) return;
  // This very binary, whatever argv[0] or PATH say. Executed by its resolved path rather than as
  // /proc/self/exe, so that ps and top still show it under its own name.
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return;
  path[n] = '\0';
  for (const auto& [name, value] : wanted)
    if (setenv(name.c_str(), value.c_str(), 1) != 0) return;
  execv(path, argv);  // returns only on error: carry on with the libraries' defaults
  for (const auto& [name, value] : wanted) unsetenv(name.c_str());
}

}  // namespace define
