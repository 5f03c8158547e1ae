"""Write a tiny ONNX model (x[N,3] + w, then Relu and a ReduceSum) and an input for it: make_model.py OUT_DIR."""
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
nodes = [helper.make_node("Add", ["x", "w"], ["z"], name="add"),
         helper.make_node("Relu", ["z"], ["r"], name="relu"),
         helper.make_node("ReduceSum", ["r"], ["s"], name="sum", keepdims=0)]
w = numpy_helper.from_array(np.array([[1.0, -2.0, 0.5]], np.float32), "w")
graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("r", TensorProto.FLOAT, ["N", 3]),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, [])], initializer=[w])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(out / "tiny.onnx"))
np.save(out / "x.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
bad = [helper.make_node("StringNormalizer", ["x"], ["y"], name="strnorm_0")]
g2 = helper.make_graph(bad, "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w])
save(helper.make_model(g2, opset_imports=[helper.make_opsetid("", 14)]), str(out / "bad.onnx"))
