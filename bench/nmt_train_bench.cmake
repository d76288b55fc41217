# nmt_train_bench trains a whole translation model (models/) and reads the CLI's memory probe.
target_link_libraries(nmt_train_bench PRIVATE define_cli)
