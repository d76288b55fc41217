# nmt_data_bench trains SentencePiece models and batches a parallel corpus (data/).
target_link_libraries(nmt_data_bench PRIVATE define_data)
