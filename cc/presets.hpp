// The configs/nic/*.yaml presets, compiled in by cc/CMakeLists.txt so that a
// bare preset name works without the repository at hand.
#pragma once

#include <cstddef>
#include <string_view>

namespace rocemu::cc::detail {

struct EmbeddedPreset {
    std::string_view name;
    std::string_view yaml;
};

extern const EmbeddedPreset kEmbeddedPresets[];
extern const std::size_t kEmbeddedPresetCount;

}  // namespace rocemu::cc::detail
