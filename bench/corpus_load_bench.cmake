# corpus_load_bench loads a corpus through the data library's token-id cache and starts `define train`.
target_link_libraries(corpus_load_bench PRIVATE define_data)
