"""svod.tinygrad.export: a TinyJit function written as one package, loaded without tinygrad's help
(svod.load_package, `svod run`), computes bitwise what the jitted function computes: an MLP, a
small CNN and tinygrad's LLM decode step (tinygrad/llm/model.py, random weights); bad calls of the
package and functions a plan cannot express raise typed errors.

tinygrad is the checkout at SVOD_TINYGRAD_DIR (default shared/tinygrad beside the repository
folder); without it these tests skip."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import svod

REPO = pathlib.Path(__file__).resolve().parents[2]
TINYGRAD_DIR = pathlib.Path(os.environ.get("SVOD_TINYGRAD_DIR", REPO.parent / "shared" / "tinygrad"))
if not (TINYGRAD_DIR / "tinygrad" / "__init__.py").is_file():
    pytest.skip(f"tinygrad is not at {TINYGRAD_DIR} (set SVOD_TINYGRAD_DIR)", allow_module_level=True)
sys.path.append(str(TINYGRAD_DIR))

import svod.tinygrad  # noqa: E402  (registers the device SVOD)
from tinygrad import Context, Tensor, TinyJit, UOp, Variable, nn  # noqa: E402


def svod_cli():
    if not os.environ.get("SVOD_BINARY_DIR"): pytest.skip("needs SVOD_BINARY_DIR for the svod command")
    return pathlib.Path(os.environ["SVOD_BINARY_DIR"]) / "svod"


def tensor(a: np.ndarray) -> Tensor:
    return Tensor(a, device="SVOD").realize()


def test_an_mlp_exports_and_computes_bitwise_what_the_jitted_function_does(tmp_path):
    rng = np.random.default_rng(0)
    w1, w2 = tensor(rng.standard_normal((64, 32), dtype=np.float32)), tensor(rng.standard_normal((32, 10), dtype=np.float32))

    @TinyJit
    def mlp(x):
        return (x @ w1).relu().contiguous().matmul(w2).softmax()

    xs = [rng.standard_normal((8, 64), dtype=np.float32) for _ in range(3)]
    svod.tinygrad.export(mlp, tensor(xs[0]), path=tmp_path / "mlp.svodpkg", input_names=["x"], output_names=["probs"])
    package = svod.load_package(tmp_path / "mlp.svodpkg")
    assert package.outputs == ["probs"]
    for x in xs:
        want = mlp(tensor(x)).numpy()
        got = package.run(x=x)["probs"]
        assert got.shape == want.shape == (8, 10) and got.tobytes() == want.tobytes()

    # From the command line, by name, with the weights the package holds.
    cli = svod_cli()
    np.save(tmp_path / "x.npy", xs[1])
    run = subprocess.run([str(cli), "run", str(tmp_path / "mlp.svodpkg"), "--input", f"x=@{tmp_path / 'x.npy'}",
                          "--output", f"probs=@{tmp_path / 'probs.npy'}"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert np.load(tmp_path / "probs.npy").tobytes() == mlp(tensor(xs[1])).numpy().tobytes()
    info = subprocess.run([str(cli), "info", str(tmp_path / "mlp.svodpkg")], capture_output=True, text=True, timeout=60)
    assert "exporter svod.tinygrad" in info.stdout and "x  f32 [8, 64]" in info.stdout, info.stdout
    assert "constant: 2 buffers" in info.stdout, info.stdout  # the two weight matrices


def test_a_cnn_exports_and_computes_bitwise_what_the_jitted_function_does(tmp_path):
    Tensor.manual_seed(1)

    class Net:
        def __init__(self):
            self.c1, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 16, 3, stride=2)
            self.norm = nn.BatchNorm(16)
            self.fc = nn.Linear(16 * 3 * 3, 5)

        def __call__(self, x):
            x = self.c1(x).relu().max_pool2d(2)
            x = self.norm(self.c2(x)).relu()
            return self.fc(x.flatten(1)).log_softmax()

    with Context(DEV="SVOD"):
        net = Net()
        for p in nn.state.get_parameters(net): p.replace(p.to("SVOD")).realize()
    run = TinyJit(lambda x: net(x))
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((2, 3, 16, 16), dtype=np.float32) for _ in range(3)]
    svod.tinygrad.export(run, tensor(xs[0]), path=tmp_path / "cnn.svodpkg")
    package = svod.load_package(tmp_path / "cnn.svodpkg")
    assert package.outputs == ["output0"]
    for x in xs:
        want = run(tensor(x)).numpy()
        assert want.shape == (2, 5)
        assert package.run(input0=x)["output0"].tobytes() == want.tobytes()


def test_a_function_that_slices_its_input_and_takes_a_variable_exports(tmp_path):
    """A kernel that reads a fixed part of the input (a view of its slot), and a Variable that becomes
    a plan variable of the same name and range, set per run."""

    @TinyJit
    def f(a, n):
        x = (a * 2).contiguous()
        z = (a[4:12].contiguous() + x[:8]).contiguous()
        return (z[:n] * 3).contiguous().sum() + z.max()

    rng = np.random.default_rng(4)
    n = Variable("n", 1, 8)
    a0 = rng.standard_normal(16, dtype=np.float32)
    svod.tinygrad.export(f, tensor(a0), n.bind(5), path=tmp_path / "f.svodpkg", input_names=["a"], output_names=["y"])
    package = svod.load_package(tmp_path / "f.svodpkg")
    assert package.variables == {"n": 5}
    for value in (5, 1, 8, 3):
        a = rng.standard_normal(16, dtype=np.float32)
        want = f(tensor(a), n.bind(value)).numpy()
        assert package.run(vars={"n": value}, a=a)["y"].tobytes() == want.tobytes()
    # A value outside the Variable's range, an unknown input, a wrong dtype or size: typed errors.
    with pytest.raises(svod.ValidationError, match=r"n = 9 is outside its bounds \[1, 8\]"):
        package.run(vars={"n": 9}, a=a0)
    with pytest.raises(svod.ValidationError, match='no buffer named "b"'):
        package.run(b=a0)
    with pytest.raises(svod.ValidationError, match="dtype"):
        package.run(a=a0.astype(np.float64))
    with pytest.raises(svod.ValidationError, match="elements"):
        package.run(a=a0[:8])


def llm(max_context: int):
    """tinygrad's LLM (tinygrad/llm/model.py) in a tiny configuration with random weights."""
    from tinygrad.llm.model import Transformer, TransformerConfig
    config = TransformerConfig(num_blocks=2, dim=64, hidden_dim=128, n_heads=4, n_kv_heads=4, norm_eps=1e-5,
                               vocab_size=256, head_dim=16, rope_theta=10000.0, rope_dim=16, v_head_dim=16,
                               max_context=max_context)
    with Context(DEV="SVOD"):
        Tensor.manual_seed(0)
        model = Transformer(config)
        Tensor.realize(*nn.state.get_parameters(model))
    return model


def export_llm_step(model, path, max_context: int):
    """Exports the model's decode step (rollout_jit: one token at start_pos, temperature) as
    inputs "token" and "temperature", output "next" and variable start_pos."""
    start_pos = UOp.variable("start_pos", 0, max_context - 1)
    temperature = Tensor([0.0], device="SVOD").realize()
    with Context(DEV="SVOD"):
        svod.tinygrad.export(model.rollout_jit, Tensor([[1]], dtype="int32", device="SVOD").realize(), start_pos.bind(0),
                             temperature, path=path, input_names=["token", "temperature"], output_names=["next"])
    return start_pos, temperature


def decode_in_tinygrad(model, start_pos, temperature, first: int, count: int) -> list[int]:
    """Greedy decoding with the jitted step from position 0."""
    tokens, token = [], first
    with Context(DEV="SVOD"):
        for pos in range(count):
            token = int(model.rollout_jit(Tensor([[token]], dtype="int32", device="SVOD").realize(), start_pos.bind(pos),
                                          temperature).item())
            tokens.append(token)
    return tokens


def test_the_llm_decode_step_exports_and_decodes_the_same_tokens(tmp_path):
    """The step's state (its KV caches and the random generator's counter) is stored as state, its
    weights as constants; decoding from the package gives tinygrad's tokens."""
    model = llm(32)
    start_pos, temperature = export_llm_step(model, tmp_path / "step.svodpkg", 32)
    want = decode_in_tinygrad(model, start_pos, temperature, 1, 12)
    package = svod.load_package(tmp_path / "step.svodpkg")
    assert package.variables == {"start_pos": 0} and package.outputs == ["next"]
    got, token = [], 1
    for pos in range(12):
        out = package.run(vars={"start_pos": pos}, token=np.array([[token]], np.int32),
                          temperature=np.array([0.0], np.float32))["next"]
        token = int(out.reshape(-1)[0])
        got.append(token)
    assert got == want
    with pytest.raises(svod.ValidationError, match="start_pos"):
        package.run(vars={"start_pos": 32})


def test_the_llm_decoded_greedily_from_c_gives_tinygrads_tokens(tmp_path):
    """examples/deploy/decode.c, linked with libsvod_c alone, decodes with the exported step: the same
    tokens as tinygrad's own greedy decoding with the jitted step, from the same state."""
    decode = svod_cli().parent / "examples" / "decode"
    if not decode.is_file(): pytest.skip(f"{decode} is not built")
    model = llm(48)
    start_pos, temperature = export_llm_step(model, tmp_path / "step.svodpkg", 48)
    want = decode_in_tinygrad(model, start_pos, temperature, 7, 40)
    run = subprocess.run([str(decode), str(tmp_path / "step.svodpkg"), "7", "40"], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert [int(line) for line in run.stdout.split()] == want
    assert len(set(want)) > 3, want  # the tokens vary: the check could fail


def test_what_a_plan_cannot_express_is_refused_naming_it(tmp_path):
    @TinyJit
    def on_cpu(a):
        x = (a * 2).contiguous()
        return ((x.to("CPU") + 1).contiguous().to("SVOD") * 3).contiguous()

    a = np.arange(8, dtype=np.float32)
    with pytest.raises(svod.UnsupportedError, match=r"call \d+ \(.*\).*CPU"):
        svod.tinygrad.export(on_cpu, tensor(a), path=tmp_path / "cpu.svodpkg")

    @TinyJit
    def double(a):
        return (a * 2).contiguous()

    big = tensor(np.arange(16, dtype=np.float32))
    double(big[:8]); double(big[:8])
    with pytest.raises(svod.UnsupportedError, match="input 'input0' is part of a larger buffer"):
        svod.tinygrad.export(double, big[:8], path=tmp_path / "view.svodpkg")
    with pytest.raises(svod.ValidationError, match="differ from those the function was captured with"):
        svod.tinygrad.export(double, tensor(np.arange(4, dtype=np.float32)), path=tmp_path / "other.svodpkg")
    with pytest.raises(svod.ArgumentTypeError, match="TinyJit"):
        svod.tinygrad.export(lambda a: a, tensor(a), path=tmp_path / "plain.svodpkg")
    assert not any(tmp_path.glob("*.svodpkg"))
