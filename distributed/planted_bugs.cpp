#include "distributed/planted_bugs.h"

namespace define::dist {

PlantedBugs& planted_bugs() {
  static PlantedBugs bugs;
  return bugs;
}

}  // namespace define::dist
