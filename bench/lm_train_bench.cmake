# lm_train_bench trains a whole language model (models/) and reads the CLI's memory probe.
target_link_libraries(lm_train_bench PRIVATE define_cli)
