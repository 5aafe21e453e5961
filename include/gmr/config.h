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
 * Marks a function whose status must be checked (allocation and creation).
 * Release functions (deallocate, destroy) are not marked, so cleanup code can
 * ignore them where it has nothing better to do.
 */
#if defined(__cplusplus) && __cplusplus >= 201703L
#define GMR_NODISCARD [[nodiscard]]
#elif defined(__GNUC__)
#define GMR_NODISCARD __attribute__((warn_unused_result))
#else
#define GMR_NODISCARD
#endif

#endif /* GMR_CONFIG_H_ */
