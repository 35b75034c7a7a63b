// Reads a config file whole, with a bound: a path naming a device or a pipe
// that never ends (/dev/zero, a stuck writer's FIFO) must give an error, not
// a loader reading without end. Pipes and process substitutions stay usable.
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

namespace rocemu {

// The largest config file a loader takes.
inline constexpr std::size_t kMaxConfigFileBytes = 16u << 20;

enum class ReadTextError { None, CannotOpen, Folder, TooLarge };

// What a loader says of CannotOpen or Folder (each says its own of TooLarge).
inline std::string read_text_error(ReadTextError err) {
    return err == ReadTextError::Folder ? "a folder, not a file" : "cannot read the file";
}

// The file's bytes, or nullopt with `err` set. A folder, or a file whose
// read fails part way (EIO), cannot be read: it is not an empty file.
inline std::optional<std::string> read_text_file(const std::string& path, ReadTextError& err,
                                                 std::size_t max_bytes = kMaxConfigFileBytes) {
    err = ReadTextError::None;
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        err = ReadTextError::Folder;
        return std::nullopt;
    }
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
    if (in.bad()) {
        err = ReadTextError::CannotOpen;
        return std::nullopt;
    }
    return out;
}

// `s` as a message can show it: control characters (a NUL, an escape) and
// bytes that are not UTF-8 become \xNN, so a binary file's bytes quoted in
// an error neither garble the terminal nor hide there. Valid UTF-8 (a name
// with an umlaut) is kept.
inline std::string printable(std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(s.size());
    const auto escape = [&](unsigned char c) {
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 15];
    };
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            if (c < 0x20 && c != '\n' && c != '\t') escape(c);
            else if (c == 0x7f) escape(c);
            else out += static_cast<char>(c);
            ++i;
            continue;
        }
        // The length a lead byte announces, and whether its continuation
        // bytes follow.
        const std::size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        bool whole = n != 0 && i + n <= s.size();
        for (std::size_t k = 1; whole && k < n; ++k) whole = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
        if (whole) {
            out.append(s.substr(i, n));
            i += n;
        } else {
            escape(c);
            ++i;
        }
    }
    return out;
}

}  // namespace rocemu
