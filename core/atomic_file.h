// Files that are either wholly written or not there: every run artifact (checkpoints, configs,
// vocabularies, exports, images) goes through write_file_atomically, so a crash, a kill or a full
// disk never leaves a half-written file under its final name.
#pragma once

#include <string>

namespace define {

// Writes `bytes` to a temporary ".<name>.tmp.<pid>" in the same folder, flushes it to disk, then
// renames it over `path` and syncs the folder. On failure (disk full, file-size limit, no
// permission) the temporary is removed and the error names `path`, the step that failed and the
// system's reason; the previous file at `path` is untouched.
void write_file_atomically(const std::string& path, const std::string& bytes);

// Removes from `dir` the temporaries that write_file_atomically left behind when its process was
// killed mid-write (".<name>.tmp.<pid>" of a process that no longer exists); returns how many.
int remove_stale_temporaries(const std::string& dir);

}  // namespace define
