/* An installed-libllm consumer: built against the installed header and
 * library only (via pkg-config or find_package), it prints the runtime
 * version and checks that it matches the header it was compiled with. */
#include <stdio.h>
#include <string.h>

#include <llm/llm.h>

int main(void) {
  char compiled[32];
  const char *v = llm_version();
  sprintf(compiled, "%d.%d.%d", LLM_VERSION_MAJOR, LLM_VERSION_MINOR, LLM_VERSION_PATCH);
  if (v == NULL || strcmp(v, compiled) != 0) {
    fprintf(stderr, "llm_version() %s != header %s\n", v ? v : "(null)", compiled);
    return 1;
  }
  printf("llm_version=%s\n", v);
  return 0;
}
