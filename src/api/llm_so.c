/* The shared library's own translation unit: everything else comes from the
 * llm_engine static archive, linked whole. Kept so that CMake has a source
 * for the libllm.so target. */
typedef int llm_so_translation_unit_is_not_empty_;
