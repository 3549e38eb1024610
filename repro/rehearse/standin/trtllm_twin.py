"""The server twin's scheduler: TensorRT-LLM's in-flight batching on a virtual clock (standard library only: the
stand-in trtllm-serve imports it in the FROM-scratch test image, and repro's calibration simulates the published
schedules with the very same code, repro/rehearse/twin.py).

The model (../shared/reference/server-twin.md, from TensorRT-LLM's docs and ai-dynamo/aiconfigurator's calendar):
- requests wait in one FIFO queue, unbounded (never a 429: trtllm-serve's HTTP path has no admission cap);
- GUARANTEED_NO_EVICT admission, strictly in order: the queue's head starts only while fewer than max_batch run and
  the KV for its input plus its reserved output (min(max_tokens, max_seq_len - input)) fits in the pool of K tokens;
  a running request is never paused;
- each iteration step, every decoding request takes one token and the rest of max_num_tokens goes to prefill chunks
  in admission order (chunked prefill, FIRST_COME_FIRST_SERVED);
- a step lasts a + b x decoders + c x prefill tokens (one price for a mixed step, not the sum of two), times a
  log-normal jitter exp(N(-sigma^2/2, sigma)) and, with probability stall_p, stall_s more;
- with probability first_stall_p a request's first token reaches the client first_stall_s late (its response path:
  the post-processing workers, the HTTP server), its steps and every other request's untouched;
- at a step's end each decoder has one more token, a request whose last prefill chunk ran has its first token, and
  a finished request frees its KV.

Times here are the real machine's seconds ("virtual"); the live server sleeps to t0 + virtual x time_scale.
`width` w < 1: a thin server, for a CPU that cannot drive the published rate: it gets w of the published load and
shares the whole server (its max_batch, KV pool and token budget) with a smooth crowd standing for the other
1 - w: the crowd holds (1 - w) x the whole server's running requests, decoders, KV and prefill tokens a step, as
a slow running mean of this server's own counts / w, started at `crowd` (the whole server's steady state at the
published schedule), or that steady state throughout (`crowd_fixed`, Offline). A step then costs what the whole
server's would, and a request here is admitted, prefilled, paused and decoded as one among the whole server's
(mean field: the crowd does not fluctuate, as a whole server's counts barely do where a thin one's would).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
import math
import random
from collections import deque
from dataclasses import dataclass, field, fields
from typing import Any

CROWD_MEAN = 0.002
"""A thin server's crowd follows its own counts / width over about the last 1 / CROWD_MEAN steps."""
MIN_WAKE_S = 0.001
"""The live loop sleeps at least this long (llm-d-inference-sim samples whole milliseconds): steps shorter than it
after scaling are run together, their tokens sent at the later wake."""


@dataclass
class TwinParams:
    a: float
    """Seconds of a step whatever it holds (launches, sampling, the scheduler)."""
    b: float
    """Seconds per decoding request in a step."""
    c: float
    """Seconds per prefill token in a step."""
    max_batch: int
    max_num_tokens: int
    kv_tokens: int
    max_seq_len: int
    isl_table: list[int]
    """Input lengths (equal-probability quantiles); a request's is chosen by its prompt."""
    osl_table: list[int]
    """Output lengths (equal-probability quantiles), chosen by the prompt, cut at the request's max_tokens."""
    jitter: float = 0.0
    stall_p: float = 0.0
    stall_s: float = 0.0
    first_delay: float = 0.0
    """Seconds from the step that ran a prompt's last chunk to its first token reaching the client: fitted only
    where the published median TTFT is above what the scheduler alone gives at the published step costs."""
    first_stall_p: float = 0.0
    first_stall_s: float = 0.0
    """A request's first token is first_stall_s later with probability first_stall_p: the TTFT tail where step
    stalls (stall_p, stall_s) would lengthen the TPOT tail past the published log's."""
    width: float = 1.0
    crowd: list[float] | None = None
    """The whole server's steady running requests, decoders, KV tokens and prefill tokens a step (width < 1)."""
    crowd_fixed: bool = False
    """Offline: the crowd keeps the whole server's steady state throughout (a crowd that followed this server's
    counts drained away while it sat idle between a warm-up and its query, and left it the whole server)."""
    time_scale: float = 1.0
    replicas: int = 1
    """A wide server: this many copies of the published server behind one endpoint, each request to one of them
    at random (a Poisson stream split at random is Poisson at each), for a run whose published rate is too slow to
    give LoadGen's early stopping its queries in the time here."""
    preroll_qps: float = 0.0
    """Virtual requests a second (this server's own share, per replica) the pre-roll runs through the engine."""
    preroll_s: float = 0.0
    """Virtual seconds of that published schedule the engine runs at once when told the measured run starts
    (POST /twin/preroll), so LoadGen's first query meets the published run's steady state, not an empty server."""
    preroll_max_tokens: int = 1
    seed: int | None = None
    isl_from_prompt: bool = False
    """Take the prompt's own length as its input length (a real dataset) instead of the table."""
    reserve: str = "max_tokens"
    """The KV a request must find free to start: "max_tokens" (GUARANTEED_NO_EVICT: input + min(max_tokens,
    max_seq_len - input)) or "output" (MAX_UTILIZATION, which the published configs set, modelled without its
    pauses: input + the answer's own length, as if the scheduler knew it)."""

    def __post_init__(self) -> None:
        nums = [self.a, self.b, self.c, self.jitter, self.stall_p, self.stall_s, self.first_delay]
        nums += [self.first_stall_p, self.first_stall_s]
        if min(nums) < 0 or not all(math.isfinite(float(x)) for x in nums) or max(self.stall_p, self.first_stall_p) > 1:
            raise ValueError("a, b, c, jitter, stall_s, first_stall_s >= 0 and 0 <= stall_p, first_stall_p <= 1")
        if min(self.max_batch, self.max_num_tokens, self.kv_tokens, self.max_seq_len) < 1:
            raise ValueError("max_batch, max_num_tokens, kv_tokens and max_seq_len >= 1")
        if not 0 < self.width <= 1:
            raise ValueError("width in (0, 1]")
        if not self.isl_table or not self.osl_table or min(*self.isl_table, *self.osl_table) < 1:
            raise ValueError("isl_table and osl_table: lengths >= 1")
        if not 0 < self.time_scale <= 10:
            raise ValueError("time_scale in (0, 10]")
        if self.reserve not in ("max_tokens", "output"):
            raise ValueError("reserve: max_tokens or output")
        if not 1 <= self.replicas <= 64 or (self.replicas > 1 and self.width < 1):
            raise ValueError("replicas in 1..64, and a wide server is no thin one (width 1)")
        if min(self.preroll_qps, self.preroll_s) < 0 or self.preroll_max_tokens < 1:
            raise ValueError("preroll_qps, preroll_s >= 0 and preroll_max_tokens >= 1")

    @classmethod
    def from_json(cls, doc: Any) -> TwinParams:
        if isinstance(doc, str):
            doc = json.loads(doc)
        if not isinstance(doc, dict):
            raise ValueError("twin parameters: a JSON object")
        names = {f.name for f in fields(cls)}
        unknown = set(doc) - names - {"sources", "note"}
        if unknown:
            raise ValueError(f"twin parameters: unknown keys {sorted(unknown)}")
        return cls(**{k: v for k, v in doc.items() if k in names})

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(eq=False)
class Job:
    isl: int
    osl: int
    need: int
    """KV tokens it must find free to start (GUARANTEED_NO_EVICT: input + reserved output; MAX_UTILIZATION: its
    context now, the input plus what it has generated)."""
    t_arr: float
    real: bool = True
    p_left: int = 0
    first_step: int = -1
    t_first: float | None = None
    t_done: float | None = None
    waiters: Any = None
    """The live server's futures (first token, done); None in a simulation."""
    gen: int = 0
    """Tokens generated when it was last paused (MAX_UTILIZATION); 0 before."""
    base_step: int = -1
    base_tokens: int = 0
    version: int = 0
    pauses: int = 0
    owner: Any = None
    """The live replica's engine that runs it (tokens so far are its to tell)."""

    def __post_init__(self) -> None:
        self.p_left = self.isl


@dataclass
class Engine:
    """One server's scheduler in virtual seconds: submit(), then advance(until) returns what happened up to then."""

    p: TwinParams
    rng: random.Random = field(default_factory=random.Random)
    now: float = 0.0
    step: int = 0
    step_end: float | None = None
    kv: int = 0
    decoders: int = 0

    def __post_init__(self) -> None:
        self.pending: list[tuple[float, int, Job]] = []
        self.queue: deque[Job] = deque()
        self.prefilling: deque[Job] = deque()
        self.order: dict[Job, None] = {}
        """Running requests in admission order (MAX_UTILIZATION pauses the newest first)."""
        self.finishing: list[tuple[int, int, int, Job]] = []
        self.chunks: list[tuple[Job, int]] = []
        self._seq = 0
        self.steps_run = 0
        self.busy_s = 0.0
        self.paused = 0
        self.max_util = self.p.reserve == "output"
        w = self.p.width
        self.crowd = [(1 - w) * x for x in (self.p.crowd or [0.0, 0.0, 0.0, 0.0])] if w < 1 else [0.0] * 4
        """The rest of the whole server a thin one shares: running, decoders, KV tokens, prefill tokens a step."""

    @property
    def running(self) -> int:
        return len(self.order)

    def job(self, isl: int, osl: int, max_tokens: int, t: float, real: bool = True) -> Job:
        """A request of `isl` input tokens and `osl` output tokens (cut at max_tokens and the sequence limit)."""
        p = self.p
        isl = max(1, min(int(isl), p.max_seq_len - 1))
        room = max(1, min(int(max_tokens), p.max_seq_len - isl))
        osl = max(1, min(int(osl), room))
        need = isl if self.max_util else isl + room
        return Job(isl, osl, min(need, p.kv_tokens), t, real)

    def submit(self, job: Job) -> None:
        self._seq += 1
        heapq.heappush(self.pending, (job.t_arr, self._seq, job))

    @property
    def idle(self) -> bool:
        return self.step_end is None and not self.order and not self.queue and not self.pending

    def next_time(self) -> float | None:
        """When something happens next without a new arrival: the step's end, or the first pending arrival."""
        if self.step_end is not None:
            return self.step_end
        if self.order or self.queue:
            return self.now
        return self.pending[0][0] if self.pending else None

    def advance(self, until: float) -> list[tuple[str, Job]]:
        """Run every step that ends by `until`; returns ('first' | 'done', job) in order."""
        events: list[tuple[str, Job]] = []
        while True:
            if self.step_end is None:
                if not self.order and not self.queue:
                    if not self.pending or self.pending[0][0] > until:
                        return events
                    self.now = max(self.now, self.pending[0][0])
                self._begin()
                if self.step_end is None:
                    return events
            if self.step_end > until:
                return events
            self._finish(events)

    def _begin(self) -> None:
        p, now = self.p, self.now
        run_o, dec_o, kv_o, pre_o = self.crowd
        while self.pending and self.pending[0][0] <= now:
            self.queue.append(heapq.heappop(self.pending)[2])
        if self.max_util:
            while self.kv + kv_o + self.decoders + dec_o > p.kv_tokens and len(self.order) > 1:
                self._pause(next(reversed(self.order)))
        while self.queue and len(self.order) + run_o < p.max_batch:
            head = self.queue[0]
            grow = self.decoders + dec_o + 1 if self.max_util else 0  # the next step's tokens must fit too
            if self.order and self.kv + kv_o + head.need + grow > p.kv_tokens:
                break
            self.queue.popleft()
            self.kv += head.need
            self.order[head] = None
            self.prefilling.append(head)
        budget = int(max(0.0, p.max_num_tokens - self.decoders - dec_o - pre_o))
        chunks: list[tuple[Job, int]] = []
        n_p = 0
        for j in self.prefilling:
            if budget <= 0:
                break
            take = min(j.p_left, budget)
            chunks.append((j, take))
            budget -= take
            n_p += take
        self.chunks = chunks
        if not chunks and not self.decoders:
            self.step_end = None
            return
        dur = p.a + p.b * (self.decoders + dec_o) + p.c * (n_p + pre_o)
        if p.width < 1 and not p.crowd_fixed:
            own = (len(self.order), self.decoders, self.kv, n_p)
            k = (1 - p.width) / p.width
            self.crowd = [c + CROWD_MEAN * (k * x - c) for c, x in zip(self.crowd, own, strict=True)]
        if p.jitter:
            dur *= math.exp(self.rng.gauss(-(p.jitter**2) / 2, p.jitter))
        if p.stall_p and self.rng.random() < p.stall_p:
            dur += p.stall_s
        self.step_end = now + dur
        self.busy_s += dur

    def _pause(self, j: Job) -> None:
        """MAX_UTILIZATION out of KV: the newest running request gives its blocks back and waits at the queue's
        head; it will prefill its input and what it generated again, then go on."""
        del self.order[j]
        if j.base_step >= 0:
            j.gen = self.tokens_of(j)
            j.version += 1
            self.decoders -= 1
            j.base_step = -1
        else:
            self.prefilling.remove(j)
        self.kv -= self._held(j)
        j.need = min(j.isl + j.gen, self.p.kv_tokens)
        j.p_left = j.isl + j.gen
        j.pauses += 1
        self.paused += 1
        self.queue.appendleft(j)

    def _held(self, j: Job) -> int:
        if not self.max_util:
            return j.need
        done = j.p_left <= 0 and j.base_step >= 0
        return j.isl + (self.tokens_of(j) if done else j.gen)

    def _finish(self, events: list[tuple[str, Job]]) -> None:
        assert self.step_end is not None
        self.step += 1
        self.steps_run += 1
        self.now = self.step_end
        self.step_end = None
        step, now = self.step, self.now
        if self.max_util:
            self.kv += self.decoders
        while self.finishing and self.finishing[0][0] <= step:
            _, _, version, j = heapq.heappop(self.finishing)
            if version != j.version:
                continue
            self._free(j)
            self.decoders -= 1
            events.append(("done", j))
        for j, take in self.chunks:
            j.p_left -= take
        self.chunks = []
        while self.prefilling and self.prefilling[0].p_left <= 0:
            j = self.prefilling.popleft()
            j.base_step, j.base_tokens = step, j.gen + 1
            if self.max_util:
                self.kv += 1
            if j.first_step < 0:
                late = self.p.first_delay
                if self.p.first_stall_p and self.rng.random() < self.p.first_stall_p:
                    late += self.p.first_stall_s
                j.first_step, j.t_first = step, now + late
                events.append(("first", j))
            if j.base_tokens >= j.osl:
                self._free(j)
                events.append(("done", j))
            else:
                self.decoders += 1
                self._seq += 1
                heapq.heappush(self.finishing, (step + j.osl - j.base_tokens, self._seq, j.version, j))

    def _free(self, j: Job) -> None:
        self.kv -= self._held(j)
        del self.order[j]
        j.t_done = max(self.now, j.t_first or self.now)
        j.base_step = -1
        j.gen = j.osl

    def tokens_of(self, j: Job) -> int:
        """Output tokens `j` has by the last step run."""
        if j.t_done is not None:
            return j.osl
        if j.base_step < 0:
            return j.gen
        return min(j.osl, j.base_tokens + self.step - j.base_step)


def pick(table: list[int], key: int) -> int:
    """The table entry a key chooses (a prompt's hash: the same prompt, the same length)."""
    return table[(key * 2654435761 & 0xFFFFFFFF) * len(table) >> 32]


def prompt_key(prompt: list[int], salt: int) -> int:
    h = 2166136261 ^ salt
    for t in prompt[:64]:
        h = ((h ^ t) * 16777619) & 0xFFFFFFFF
    return h ^ len(prompt)


def simulate(p: TwinParams, arrivals: list[tuple[float, int, int]], max_tokens: int) -> tuple[list[Job], Engine]:
    """Every (time, isl, osl) request through one server's engine, to the end."""
    eng = Engine(p, random.Random(p.seed))
    jobs = [eng.job(isl, osl, max_tokens, t) for t, isl, osl in arrivals]
    for j in jobs:
        eng.submit(j)
    eng.advance(math.inf)
    return jobs, eng


class LiveTwin:
    """The engines (one per replica) on the event loop's clock: t0 + virtual x time_scale, each woken at its step's
    end (at least MIN_WAKE_S apart) and on an arrival while idle."""

    def __init__(self, p: TwinParams) -> None:
        self.p = p
        self.rng = random.Random(p.seed)
        self.engines = [Engine(p, random.Random(self.rng.random())) for _ in range(p.replicas)]
        self.t0: float | None = None
        self.wakes = [asyncio.Event() for _ in self.engines]
        self.tasks: list[asyncio.Task[None]] = []
        self.frozen = False
        """After a pre-roll the engines hold their steady state, no step run, until the first request comes."""

    @property
    def engine(self) -> Engine:
        return self.engines[0]

    def vnow(self) -> float:
        loop = asyncio.get_running_loop()
        if self.t0 is None:
            self.t0 = loop.time()
        if self.frozen:
            return max(e.now for e in self.engines)
        return (loop.time() - self.t0) / self.p.time_scale

    def lengths(self, prompt: list[int]) -> tuple[int, int]:
        isl = len(prompt) if self.p.isl_from_prompt else pick(self.p.isl_table, prompt_key(prompt, 1))
        return isl, pick(self.p.osl_table, prompt_key(prompt, 2))

    def _start(self) -> None:
        if not self.tasks:
            loop = asyncio.get_running_loop()
            self.tasks = [loop.create_task(self._run(i)) for i in range(len(self.engines))]

    def submit(self, prompt: list[int], max_tokens: int) -> Job:
        """The request (its futures: first token, done), queued at the virtual now on one replica."""
        self._start()
        if self.frozen:  # the measured run's first request: the clock goes on from the pre-rolled state
            self.frozen = False
            self.t0 = asyncio.get_running_loop().time() - max(e.now for e in self.engines) * self.p.time_scale
            for w in self.wakes:
                w.set()
        i = self.rng.randrange(len(self.engines))
        eng = self.engines[i]
        t = max(self.vnow(), eng.now)
        isl, osl = self.lengths(prompt)
        job = eng.job(isl, osl, max_tokens, t)
        loop = asyncio.get_running_loop()
        job.waiters, job.owner = (loop.create_future(), loop.create_future()), eng
        eng.submit(job)
        self.wakes[i].set()
        return job

    def preroll(self) -> dict[str, float]:
        """Run `preroll_s` virtual seconds of the published schedule (Poisson at preroll_qps per replica) through
        every engine at once and hold that state, the clock stopped, until the next request: the measured run's
        first query meets the published run's steady state, however long LoadGen takes to start. Sent after the
        warm-up, when nothing of the run's own is in flight."""
        p = self.p
        if p.preroll_qps <= 0 or p.preroll_s <= 0:
            return {"phantoms": 0, "virtual_s": 0.0}
        self._start()
        start = max(self.vnow(), *(e.now for e in self.engines))
        n = 0
        for eng in self.engines:
            t = start
            while True:
                t += self.rng.expovariate(p.preroll_qps)
                if t >= start + p.preroll_s:
                    break
                isl, osl = pick(p.isl_table, self.rng.getrandbits(32)), pick(p.osl_table, self.rng.getrandbits(32))
                eng.submit(eng.job(isl, osl, p.preroll_max_tokens, t, real=False))
                n += 1
            eng.advance(start + p.preroll_s)
        self.frozen = True
        return {"phantoms": n, "virtual_s": p.preroll_s}

    def close(self) -> None:
        """Stop the engines; every request still waiting is cancelled (its connection closes)."""
        for task in self.tasks:
            task.cancel()
        for eng in self.engines:
            for j in [*eng.order, *eng.queue, *(job for _, _, job in eng.pending)]:
                for fut in j.waiters or ():
                    if not fut.done():
                        fut.cancel()

    async def _run(self, i: int) -> None:
        loop = asyncio.get_running_loop()
        k, eng, wake = self.p.time_scale, self.engines[i], self.wakes[i]
        while True:
            for kind, j in eng.advance(self.vnow()):
                if j.waiters is None:
                    continue
                fut = j.waiters[0] if kind == "first" else j.waiters[1]
                when = j.t_first if kind == "first" else j.t_done
                assert self.t0 is not None and when is not None
                if self.t0 + when * k > loop.time() + MIN_WAKE_S:  # a first token still on its way (first_delay)
                    loop.call_at(self.t0 + when * k, _settle, fut, when)
                else:
                    _settle(fut, when)
            nxt = eng.next_time()
            wake.clear()
            if nxt is None or self.frozen:
                await wake.wait()
                continue
            assert self.t0 is not None
            delay = max(MIN_WAKE_S, self.t0 + nxt * k - loop.time())
            with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                await asyncio.wait_for(wake.wait(), delay)


def _settle(fut: asyncio.Future[Any], value: float) -> None:
    if not fut.done():
        fut.set_result(value)


def twin_set(doc: Any) -> tuple[dict[str, TwinParams], str]:
    """STANDIN_TWIN: one twin's parameters, or {"scenarios": {name: params}, "active": name}: every scenario of a
    rehearsal in one server, so the servers a rehearsal keeps serve each run's twin (POST /twin/scenario)."""
    if isinstance(doc, str):
        doc = json.loads(doc)
    if isinstance(doc, dict) and "scenarios" in doc:
        sets = doc["scenarios"]
        if not isinstance(sets, dict) or not sets:
            raise ValueError("twin scenarios: a non-empty object")
        out = {str(k): TwinParams.from_json(v) for k, v in sets.items()}
        active = str(doc.get("active") or next(iter(out)))
        if active not in out:
            raise ValueError(f"twin scenarios: no {active!r}")
        return out, active
    return {"": TwinParams.from_json(doc)}, ""
