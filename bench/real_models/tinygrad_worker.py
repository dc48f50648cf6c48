"""tinygrad's side of bench/real_models/real_models.py: a worker process that reads one JSON request
a line on stdin and answers each with one JSON line on stdout. real_models.py starts one per
configuration (thread count, svod's compiler), each with its own environment and caches:

    PYTHONPATH=TINYGRAD:build/release/python /usr/bin/python3 tinygrad_worker.py

Requests ({"cmd": name, ...arguments}; an answer {"error": text} when one fails):
  load(name, path, input, devices, output_prefix): the ONNX model through tinygrad's ONNX frontend
      on each device, jitted (TinyJit), called three times (run, capture, replay) on the input
      .npy; the last output goes to OUTPUT_PREFIX<device>.npy. With BEAM in the worker's environment
      the first call searches the kernels; "beam" gives svod's search loop's counts for the load
      (svod.tinygrad_search.stats).
  time(name, device, seconds, clock): calls of one model, `seconds` of each kind, each call's time in ms
      on CLOCKS[clock]:
      e2e     a user's call: a tensor made from the numpy input, the jitted call, .numpy() out;
      replay  tinygrad's replay of the captured calls alone (no input tensor, no copy out);
      plans   SVOD only: the svod plans that SVODGraph made of the jitted batches, executed
              directly, no tinygrad in the loop.
  export(name, path): the SVOD model's jitted function as a package (svod.tinygrad.export), input
      "x", output "y", for exported_call.c to call from C.
  profile(name, replays, top): svod.profile() of the plans' replays: the ops that take the most time.
  llm_load(device, max_context) / llm_decode(device, tokens, clock): tinygrad's LLM (tinygrad/llm/model.py,
      random weights) decoding greedily; each token's time from the generator, in ms.
  llm_export(device, path): its decode step as a package (inputs "token" and "temperature", variable
      start_pos, output "next"), with the state it has now.
"""
import contextlib
import json
import os
import sys
import time
import traceback

import numpy as np

import svod
import svod.tinygrad
import svod.tinygrad_search
from tinygrad import Context, Device, Tensor, TinyJit, nn
from tinygrad.engine.jit import _prepare_jit_inputs
from tinygrad.helpers import prod
from tinygrad.nn import onnx
from tinygrad.uop.ops import Ops


def allow_empty_initializers():
    """tinygrad's ONNX loader asserts that every tensor has exactly one data field; PP-OCRv4
    detection has a zero-element constant (dims [0]) with none. This parses such a tensor as an
    empty one and fails on anything else as before: a change at run time, tinygrad is not edited."""
    parse = onnx.OnnxPBParser._parse_TensorProto

    def parse_allowing_empty(self):
        start = self.reader.tell()
        try:
            return parse(self)
        except AssertionError:
            self.reader.seek(start)
            tensor = {"dims": []}
            for field, wire_type in self._parse_message(self._decode_end_pos()):
                if field == 1: tensor["dims"].append(self.reader.read_int64())
                elif field == 2: tensor["data_type"] = self.reader.read_int64()
                else: self.reader.skip_field(wire_type)
            if prod(tensor["dims"]) != 0: raise
            dtype = onnx.OnnxDataType(tensor["data_type"]).to_dtype()
            tensor["parsed_tensor"] = Tensor.empty(*tensor["dims"], dtype=dtype)
            return tensor

    onnx.OnnxPBParser._parse_TensorProto = parse_allowing_empty


@contextlib.contextmanager
def recording_svod_graphs(graphs: list):
    """Appends to `graphs` every SVODGraph (one svod plan per jitted batch) made inside the block."""
    init = svod.tinygrad.SVODGraph.__init__

    def recording_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        graphs.append(self)

    svod.tinygrad.SVODGraph.__init__ = recording_init
    try:
        yield
    finally:
        svod.tinygrad.SVODGraph.__init__ = init


# wall: time as the caller waits for it. cpu: the CPU time of the whole process (all its threads),
# which leaves out the time other processes hold the cores: with one thread, a call's own work on a
# loaded machine, as long as no thread of the process spins while it waits.
CLOCKS = {"wall": time.perf_counter_ns, "cpu": time.process_time_ns}


def timed_ms(fn, seconds: float, clock: str) -> list[float]:
    """Calls fn until `seconds` have passed (at least once); each call's time in ms on CLOCKS[clock]."""
    now, times, end = CLOCKS[clock], [], time.perf_counter() + seconds
    while not times or time.perf_counter() < end:
        start = now()
        fn()
        times.append((now() - start) / 1e6)
    return times


class Model:
    """One ONNX model jitted on one tinygrad device."""

    def __init__(self, path: str, device: str, x: np.ndarray):
        self.device, self.x, self.graphs = device, x, []
        start = time.perf_counter()
        with Context(DEV=device):
            runner = onnx.OnnxRunner(path)
            input_name, output_name = next(iter(runner.graph_inputs)), runner.graph_outputs[0]
            self.jit = TinyJit(lambda t: runner({input_name: t})[output_name])
            self.load_s = time.perf_counter() - start
            with recording_svod_graphs(self.graphs):
                for _ in range(3): self.output = self.call()  # run, capture, replay
        self.prepare_s = time.perf_counter() - start
        # The replay alone: the captured calls on an input tensor made once.
        self.input = Tensor(x, device=device).realize()
        self.input_uops, self.var_vals = _prepare_jit_inputs((self.input,), {})[:2]
        self.outside_graphs = sum(1 for call in self.jit.captured.linear.src
                                  if not (call.src[0].op is Ops.CUSTOM_FUNCTION and call.src[0].arg == "graph"))

    def call(self) -> np.ndarray:
        return self.jit(Tensor(self.x, device=self.device)).numpy()

    def replay(self):
        self.jit.captured(self.input_uops, self.var_vals)
        Device[self.device].synchronize()

    def execute_plans(self):
        for graph in self.graphs: graph.plan.execute()


def llm_config(max_context: int):
    from tinygrad.llm.model import TransformerConfig
    # As bench/tinygrad_search_llm.py: 4 blocks, dim 512, random weights.
    return TransformerConfig(num_blocks=4, dim=512, hidden_dim=1408, n_heads=8, n_kv_heads=8, norm_eps=1e-5,
                             vocab_size=4096, head_dim=64, rope_theta=10000.0, rope_dim=64, v_head_dim=64,
                             max_context=max_context)


class Worker:
    def __init__(self):
        self.models: dict[tuple[str, str], Model] = {}
        self.llms: dict[str, tuple] = {}  # device -> (model, generator, tokens so far)

    def load(self, name, path, input, devices, output_prefix):
        x = np.load(input)
        answer = {}
        for device in devices:
            searched = dict(svod.tinygrad_search.stats)
            model = self.models[(name, device)] = Model(path, device, x)
            np.save(f"{output_prefix}{device}.npy", model.output)
            answer[device] = {"load_s": model.load_s, "prepare_s": model.prepare_s,
                              "svod_plans": len(model.graphs), "outside_graphs": model.outside_graphs,
                              "beam": {k: v - searched[k] for k, v in svod.tinygrad_search.stats.items()}}
        return answer

    def time(self, name, device, seconds, clock):
        model = self.models[(name, device)]
        kinds = {"e2e": model.call, "replay": model.replay}
        if model.graphs: kinds["plans"] = model.execute_plans
        return {kind: timed_ms(fn, seconds, clock) for kind, fn in kinds.items()}

    def export(self, name, path):
        model = self.models[(name, "SVOD")]
        svod.tinygrad.export(model.jit, Tensor(model.x, device="SVOD").realize(), path=path, input_names=["x"],
                             output_names=["y"])
        return {}

    def profile(self, name, replays, top):
        model = self.models[(name, "SVOD")]
        with svod.profile() as p:
            for _ in range(replays): model.execute_plans()
        # Each op's median, not its total: a moment of load elsewhere on the machine moves less.
        # "op" numbers the ops of all plans together, in the order the plans ran: the same op in every
        # worker that compiled the same sources.
        ops = [{"op": op["op"], "kernel": op["kernel"], "us": op["median_us"] * op["calls"] / replays}
               for op in json.loads(p.json())["ops"]]
        ops.sort(key=lambda op: -op["us"])
        return {"kernels_us": sum(op["us"] for op in ops), "ops": ops[:top]}

    def llm_load(self, device, max_context):
        from tinygrad.llm.model import Transformer
        with Context(DEV=device):
            Tensor.manual_seed(0)  # the same weights on every device
            model = Transformer(llm_config(max_context))
            Tensor.realize(*nn.state.get_parameters(model))
            generator = model.generate(list(range(1, 17)))
            # The prompt's prefill, then the decode step's run, capture and first replays.
            tokens = [next(generator) for _ in range(5)]
        self.llms[device] = (model, generator, tokens)
        return {}

    def llm_export(self, device, path):
        from tinygrad import UOp
        model, generator, out = self.llms[device]
        start_pos = UOp.variable("start_pos", 0, model.max_context - 1)
        with Context(DEV=device):
            svod.tinygrad.export(model.rollout_jit, Tensor([[out[-1]]], dtype="int32").realize(),
                                 start_pos.bind(16 + len(out) - 1), Tensor([0.0]).realize(), path=path,
                                 input_names=["token", "temperature"], output_names=["next"])
        return {"start_pos": 16 + len(out) - 1}

    def llm_decode(self, device, tokens, clock):
        _, generator, out = self.llms[device]
        ms = []
        with Context(DEV=device):
            for _ in range(tokens):
                start = CLOCKS[clock]()
                out.append(next(generator))  # the token's .item(): the step has finished
                ms.append((CLOCKS[clock]() - start) / 1e6)
        return {"ms": ms, "tokens": out}


def main():
    # Answers go to the real stdout; anything tinygrad or svod prints goes to stderr.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    allow_empty_initializers()
    worker = Worker()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = getattr(worker, request.pop("cmd"))(**request)
        except Exception:  # the caller reports it and stops
            answer = {"error": traceback.format_exc()}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
