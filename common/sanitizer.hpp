// ROCEMU_SANITIZED_HEAP is defined when a sanitizer's allocator owns the heap
// (ASan, TSan, MSan): it ignores glibc's tunables and must see every block.
// GCC says so with __SANITIZE_*, clang with __has_feature.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ROCEMU_SANITIZED_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define ROCEMU_SANITIZED_HEAP 1
#endif
#endif
