/*
 * gmr/config.h: export and attribute macros shared by every public header.
 *
 * Thread-safe: not applicable (macros only).
 */
#ifndef GMR_CONFIG_H_
#define GMR_CONFIG_H_

/* Marks a function exported from the library (visibility, like UV_EXTERN). */
#if defined(_WIN32) && defined(GMR_SHARED_BUILD)
#define GMR_API __declspec(dllexport)
#elif defined(_WIN32) && defined(GMR_SHARED)
#define GMR_API __declspec(dllimport)
#elif defined(__GNUC__)
#define GMR_API __attribute__((visibility("default")))
#else
#define GMR_API
#endif

/*
 * Marks a function whose status must be checked: every public function that
 * returns a gmr_status, release functions (deallocate, destroy) included,
 * since they can refuse (GMR_ERR_BUSY, a bad free) and then released nothing.
 * To ignore a status on purpose, C++ writes `(void)call;`; C should write
 * GMR_IGNORE_STATUS(call), because GCC does not let a (void) cast silence
 * warn_unused_result in C.
 */
#if defined(__cplusplus) && __cplusplus >= 201703L
#define GMR_NODISCARD [[nodiscard]]
#elif defined(__GNUC__)
#define GMR_NODISCARD __attribute__((warn_unused_result))
#else
#define GMR_NODISCARD
#endif

/* Ignore the status of `call` on purpose, in C and C++ (see GMR_NODISCARD). */
#define GMR_IGNORE_STATUS(call) ((void)!(call))

/*
 * Marks a name kept for one minor version after it was renamed (CHANGELOG.md
 * lists them, with the new names): code that uses it still compiles and
 * links, with a warning that names the replacement; the next minor version
 * removes it. Compilers other than GCC and Clang give no warning.
 */
#if defined(__GNUC__)
#define GMR_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define GMR_DEPRECATED(msg)
#endif

#endif /* GMR_CONFIG_H_ */
