// The spec options bound to a field of their component's C config
// (stack/registry.h, GMR__FIELD): gmr__options_apply writes each through its
// width, so a field the option's type cannot fill, or a range the field
// cannot hold, would change a value silently. Checked for every component a
// context knows, libgmr_nccl's included.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "gmr/context.h"
#include "gmr/nccl/nccl.h"
#include "stack/context.h"
#include "stack/registry.h"
#include "tests/support/sim_fixture.h"

namespace {

using Fields = gmr_test::SimTest;

// The largest value a field of `bytes` bytes holds.
uint64_t Widest(size_t bytes) {
  return bytes >= 8 ? UINT64_MAX : (uint64_t{1} << (8 * bytes)) - 1;
}

// "" when option `d` of component `c` is bound soundly, else why not.
std::string Problem(const gmr__component &c, const gmr__option_def &d) {
  const std::string where = std::string(c.name) + "." + d.name + ": ";
  const size_t b = d.field_bytes;
  switch (d.type) {
    case GMR__OPTION_SIZE:
    case GMR__OPTION_UINT: {
      if (b != 1 && b != 2 && b != 4 && b != 8) return where + "width " + std::to_string(b);
      // A narrow field needs a maximum it can hold (0 means none).
      if (b < 8 && (d.max_value == 0 || d.max_value > Widest(b))) {
        return where + "range up to " + std::to_string(d.max_value) + " in " + std::to_string(b) +
               " bytes";
      }
      if (d.allow_unlimited && d.unlimited_field > Widest(b)) return where + "unlimited value";
      if (d.allow_unlimited && d.unlimited_name == nullptr) return where + "no word for none";
      return "";
    }
    case GMR__OPTION_BOOL:
      return b == sizeof(bool) ? "" : where + "a bool field of " + std::to_string(b) + " bytes";
    case GMR__OPTION_CHOICE: {
      size_t n = 0;
      while (d.choices != nullptr && d.choices[n] != nullptr) n++;
      if (b != 1 && b != 2 && b != 4 && b != 8) return where + "width " + std::to_string(b);
      return n > 0 && n - 1 <= Widest(b) ? "" : where + "choices";
    }
    case GMR__OPTION_DEVICE:
      return b == sizeof(int) ? "" : where + "a device field that is no int";
    case GMR__OPTION_FACTOR:
      return b == sizeof(double) ? "" : where + "a factor field that is no double";
    case GMR__OPTION_STRING:
      return b == sizeof(const char *) ? "" : where + "a text field that is no pointer";
    default:
      return where + "a policy option cannot have a field";
  }
}

TEST_F(Fields, EveryBoundOptionFitsItsField) {
  gmr_context *ctx = nullptr;
  ASSERT_EQ(GMR_OK, gmr_context_create(&ctx));
  ASSERT_EQ(GMR_OK, gmr_nccl_register_components(ctx));
  const gmr__component *all[64];
  const size_t count = gmr__context_list_components(ctx, all, 64);
  size_t bound = 0;
  for (size_t i = 0; i < count && i < 64; ++i) {
    const gmr__component &c = *all[i];
    bool any = false;
    for (size_t k = 0; k < c.option_count; ++k) {
      const gmr__option_def &d = c.options[k];
      if (d.field_bytes == 0) continue;
      any = true;
      bound++;
      EXPECT_EQ("", Problem(c, d));
    }
    // Without a default config the component describes every default itself.
    if (any && c.config_default == nullptr) {
      EXPECT_NE(nullptr, c.describe_default) << c.name;
    }
  }
  EXPECT_GE(count, 15u) << "libgmr's components and libgmr_nccl's";
  EXPECT_GE(bound, 50u) << "most options have a field";
  EXPECT_EQ(GMR_OK, gmr_context_destroy(ctx));
}

}  // namespace
