# nmt_train_bench trains a whole translation model (models/).
target_link_libraries(nmt_train_bench PRIVATE define_models define_data)
