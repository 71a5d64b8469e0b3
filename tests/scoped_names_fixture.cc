// C++ functions that GCC's DWARF names without a linkage name: member
// templates of class templates called with a lambda, inlined into main.
// test-symcache-elf.c reads their names back (with their class) from the
// DWARF and from the symbol cache: before session 24 both calls read as one
// "call<main()::<lambda()> >".
#include <cstdlib>

namespace shop {
template <class T> struct Holder {
  template <class F> static void call(F f) {
    f();
    asm volatile("");
  }
};
} // namespace shop

int main() {
  shop::Holder<int>::call([] { std::getenv("USER"); });
  shop::Holder<long>::call([] { std::getenv("HOME"); });
  return 0;
}
