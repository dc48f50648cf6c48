// ONNX Runtime's side of bench/real_models/real_models.py: a worker that reads one JSON request a
// line on stdin and answers each with one JSON line on stdout.
//
//     node ort_worker.js NODE_MODULES     (the folder install.sh filled)
//
// Requests:
//   {"cmd": "load", "name", "path", "threads": [1, 2], "input": x.npy, "output_prefix"}
//       creates one session per intra-op thread count, timed, runs each once on the input and
//       writes its output to OUTPUT_PREFIX<threads>.npy; answers {"create_ms": {threads: ms}}.
//   {"cmd": "time", "name", "threads", "seconds", "clock"}
//       calls the session until `seconds` have passed (at least once); answers {"ms": [...]}, each
//       one call end to end: the input tensor made from the array, run, the output's data read;
//       timed on the wall clock, or with clock "cpu" in the process's CPU time (user and system,
//       all threads), which leaves out the time other processes hold the cores.
//   {"cmd": "version"}: {"version": onnxruntime-node's version}.
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const readline = require("node:readline");

const modules = process.argv[2];
const ort = require(path.join(modules, "onnxruntime-node"));

// The .npy format: magic, version, header length, a Python dict literal, then the data.
function readNpy(file) {
  const bytes = fs.readFileSync(file);
  if (bytes.toString("latin1", 1, 6) !== "NUMPY") throw new Error(`${file} is not a .npy file`);
  const major = bytes[6];
  const headerLength = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = bytes.toString("latin1", start, start + headerLength);
  if (!header.includes("'descr': '<f4'") || header.includes("'fortran_order': True"))
    throw new Error(`${file}: only C-ordered little-endian float32 arrays are read (${header.trim()})`);
  const dims = header.match(/'shape': \(([^)]*)\)/)[1].split(",").filter((s) => s.trim()).map(Number);
  const data = bytes.subarray(start + headerLength);
  const floats = new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.length));
  return { dims, data: floats };
}

function writeNpy(file, dims, floats) {
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(", ")})`;
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shape}, }`;
  header += " ".repeat(63 - ((10 + header.length) % 64)) + "\n";  // the data starts 64-byte aligned
  const prefix = Buffer.alloc(10);
  prefix.write("\x93NUMPY", 0, "latin1");
  prefix[6] = 1;
  prefix.writeUInt16LE(header.length, 8);
  fs.writeFileSync(file, Buffer.concat([prefix, Buffer.from(header, "latin1"),
                                        Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength)]));
}

// Now in ms on each clock.
const clocks = {
  wall: () => Number(process.hrtime.bigint()) / 1e6,
  cpu: () => { const { user, system } = process.cpuUsage(); return (user + system) / 1e3; },
};

const models = new Map();  // name -> {input, sessions: Map(threads -> session)}

async function call(session, input) {
  const feeds = { [session.inputNames[0]]: new ort.Tensor("float32", input.data, input.dims) };
  const results = await session.run(feeds);
  const output = results[session.outputNames[0]];
  return { dims: output.dims, data: output.data };
}

async function handle(request) {
  switch (request.cmd) {
    case "version":
      return { version: require(path.join(modules, "onnxruntime-node", "package.json")).version };
    case "load": {
      const input = readNpy(request.input);
      const sessions = new Map();
      const createMs = {};
      for (const threads of request.threads) {
        const start = process.hrtime.bigint();
        const session = await ort.InferenceSession.create(request.path, {
          intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: "sequential",
          graphOptimizationLevel: "all" });
        createMs[threads] = Number(process.hrtime.bigint() - start) / 1e6;
        sessions.set(threads, session);
        const output = await call(session, input);
        writeNpy(`${request.output_prefix}${threads}.npy`, output.dims, output.data);
      }
      models.set(request.name, { input, sessions });
      return { create_ms: createMs };
    }
    case "time": {
      const { input, sessions } = models.get(request.name);
      const session = sessions.get(request.threads);
      const now = clocks[request.clock];
      const ms = [];
      const end = process.hrtime.bigint() + BigInt(Math.round(request.seconds * 1e9));
      do {
        const start = now();
        await call(session, input);
        ms.push(now() - start);
      } while (process.hrtime.bigint() < end);
      return { ms };
    }
    default:
      throw new Error(`unknown request ${JSON.stringify(request.cmd)}`);
  }
}

// One request at a time, in order: the caller waits for each answer before it sends the next.
const lines = readline.createInterface({ input: process.stdin });
let queue = Promise.resolve();
lines.on("line", (line) => {
  queue = queue.then(async () => {
    let reply;
    try {
      reply = await handle(JSON.parse(line));
    } catch (e) {
      reply = { error: String(e && e.stack ? e.stack : e) };
    }
    process.stdout.write(JSON.stringify(reply) + "\n");
  });
});
