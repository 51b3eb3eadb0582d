/* Preloaded code: says so on standard error when the loader runs it. */
#include <unistd.h>
__attribute__((constructor)) static void announce(void) {
    (void)!write(2, "preloaded\n", 10);
}
