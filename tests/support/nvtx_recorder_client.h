/*
 * tests/support/nvtx_recorder_client.h: read what tests/support/nvtx_recorder.c
 * recorded, from a test whose NVTX_INJECTION64_PATH names that library.
 *
 * NVTX loads the library at the process's first NVTX call (gmr makes it when
 * the first NVTX logging adaptor is created, or a pool registers its first
 * heap); before that, loaded() is false and lines() is empty. The functions
 * are found with dlopen(RTLD_NOLOAD) on the same path and dlsym.
 */
#ifndef GMR_TESTS_SUPPORT_NVTX_RECORDER_CLIENT_H_
#define GMR_TESTS_SUPPORT_NVTX_RECORDER_CLIENT_H_

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace gmr_test {

class NvtxRecorder {
 public:
  // True once NVTX has loaded the recorder into this process.
  static bool loaded() { return handle() != nullptr; }

  // Every line recorded since the last clear(), in order.
  static std::vector<std::string> lines() {
    std::vector<std::string> out;
    void *h = handle();
    if (h == nullptr) return out;
    auto count = reinterpret_cast<size_t (*)()>(dlsym(h, "gmr_nvtx_recorder_count"));
    auto line = reinterpret_cast<size_t (*)(size_t, char *, size_t)>(
        dlsym(h, "gmr_nvtx_recorder_line"));
    if (count == nullptr || line == nullptr) return out;
    size_t n = count();
    for (size_t i = 0; i < n; ++i) {
      char buf[1024];
      if (line(i, buf, sizeof buf) == static_cast<size_t>(-1)) break;
      out.emplace_back(buf);
    }
    return out;
  }

  static void clear() {
    void *h = handle();
    if (h == nullptr) return;
    auto fn = reinterpret_cast<void (*)()>(dlsym(h, "gmr_nvtx_recorder_clear"));
    if (fn != nullptr) fn();
  }

  // "0x7f12..." as the recorder writes pointers.
  static std::string hex(const void *p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx",
                  static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
    return buf;
  }

 private:
  static void *handle() {
    const char *path = std::getenv("NVTX_INJECTION64_PATH");
    if (path == nullptr || path[0] == '\0') return nullptr;
    // RTLD_NOLOAD: find the copy NVTX loaded, never load a second one. The
    // reference it adds is dropped at once; NVTX keeps the library loaded.
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (h != nullptr) dlclose(h);
    return h;
  }
};

}  // namespace gmr_test

#endif  // GMR_TESTS_SUPPORT_NVTX_RECORDER_CLIENT_H_
