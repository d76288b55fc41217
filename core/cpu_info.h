// What /proc/cpuinfo says of the first CPU: the model name `lscpu` prints, and its flags. For
// naming the machine next to speed figures and in per-machine caches.
#pragma once

#include <fstream>
#include <string>
#include <string_view>

namespace define {

// The value of the first "<key> : value" line of /proc/cpuinfo ("model name", "flags"), or
// `fallback` when there is none.
inline std::string cpuinfo_field(std::string_view key, const std::string& fallback = "") {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || line.rfind(key, 0) != 0) continue;
    const std::string_view name = std::string_view(line).substr(0, colon);
    if (name.substr(0, name.find_last_not_of(" \t") + 1) != key) continue;
    return colon + 2 <= line.size() ? line.substr(colon + 2) : "";
  }
  return fallback;
}

}  // namespace define
