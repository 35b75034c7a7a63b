// Reads a config file whole, with a bound: a path naming a device or a pipe
// that never ends (/dev/zero, a stuck writer's FIFO) must give an error, not
// a loader reading without end. Pipes and process substitutions stay usable.
#pragma once

#include <cstddef>
#include <fstream>
#include <optional>
#include <string>

namespace rocemu {

// The largest config file a loader takes.
inline constexpr std::size_t kMaxConfigFileBytes = 16u << 20;

enum class ReadTextError { None, CannotOpen, TooLarge };

// The file's bytes, or nullopt with `err` set (CannotOpen, TooLarge).
inline std::optional<std::string> read_text_file(const std::string& path, ReadTextError& err,
                                                 std::size_t max_bytes = kMaxConfigFileBytes) {
    err = ReadTextError::None;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        err = ReadTextError::CannotOpen;
        return std::nullopt;
    }
    std::string out;
    char chunk[65536];
    while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
        out.append(chunk, static_cast<std::size_t>(in.gcount()));
        if (out.size() > max_bytes) {
            err = ReadTextError::TooLarge;
            return std::nullopt;
        }
    }
    return out;
}

}  // namespace rocemu
