// fixture_cc.cc: the C++ call chain of the symbolization fixture:
//   run_cc (extern "C") -> fx::Widget::poke(int) (a namespaced method)
//     -> fx::twice<int>(int) (a template) -> the event.
#include "recorder/stackrec.h"
#include "tests/symfixture/fixture.h"

namespace fx {

template <typename T>
__attribute__((noinline)) T twice(T v) {
  AT(L_TWICE, STKR_EVENT("sym.cc", &v, sizeof v));
  __asm__ volatile("" ::: "memory");
  return v + v;
}

class Widget {
 public:
  __attribute__((noinline)) int poke(int i);
  int base = 1;
};

int Widget::poke(int i) {
  int r;
  AT(L_POKE, r = twice<int>(i + base));
  __asm__ volatile("" ::: "memory");
  return r;
}

}  // namespace fx

extern "C" void run_cc(int i) {
  fx::Widget w;
  AT(L_RUN_CC, (void)w.poke(i));
  __asm__ volatile("" ::: "memory");
}
