// Config files compiled into the binary by fabric/CMakeLists.txt, so the
// default fabric and the named switch profiles work without the repository.
#pragma once

#include <cstddef>
#include <string_view>

namespace rocemu::fabric::detail {

struct EmbeddedFile {
    std::string_view name;  // file name without .yaml
    std::string_view yaml;
};

extern const EmbeddedFile kEmbeddedFabrics[];
extern const std::size_t kEmbeddedFabricCount;
extern const EmbeddedFile kEmbeddedSwitchProfiles[];
extern const std::size_t kEmbeddedSwitchProfileCount;

}  // namespace rocemu::fabric::detail
