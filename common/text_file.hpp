// Reads a config file whole, with a bound: a path naming a device or a pipe
// that never ends (/dev/zero, a stuck writer's FIFO) must give an error, not
// a loader reading without end. Pipes and process substitutions stay usable.
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace rocemu {

// The largest config file a loader takes.
inline constexpr std::size_t kMaxConfigFileBytes = 16u << 20;

enum class ReadTextError { None, CannotOpen, TooLarge };

// What a loader says of an error: "cannot read the file" and why.
inline std::string read_text_error(const std::string& path, ReadTextError err) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return "a folder, not a file";
    if (err == ReadTextError::TooLarge) return "larger than " + std::to_string(kMaxConfigFileBytes >> 20) + " MiB";
    return "cannot read the file";
}

// The file's bytes, or nullopt with `err` set (CannotOpen, TooLarge). A
// folder, or a file whose read fails part way (EIO), cannot be read: it is
// not an empty file.
inline std::optional<std::string> read_text_file(const std::string& path, ReadTextError& err,
                                                 std::size_t max_bytes = kMaxConfigFileBytes) {
    err = ReadTextError::None;
    std::error_code ec;
    std::ifstream in(path, std::ios::binary);
    if (!in || std::filesystem::is_directory(path, ec)) {
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
    if (in.bad()) {
        err = ReadTextError::CannotOpen;
        return std::nullopt;
    }
    return out;
}

}  // namespace rocemu
