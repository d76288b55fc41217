# lm_train_bench trains a whole language model (models/).
target_link_libraries(lm_train_bench PRIVATE define_models)
