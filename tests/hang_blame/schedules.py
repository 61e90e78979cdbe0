"""Realistic training schedules as meshsim scenarios, with one planted fault.

A schedule is a [pp, dp, tp] mesh running Megatron's 1F1B pipeline (activations and
gradients over point-to-point, a TP all_reduce in every forward and backward, a DP gradient
all_reduce per train step), its interleaved variant (several model chunks per stage, the last
stage feeding the first), or an FSDP layer loop (per layer: the dp all_gather of its weights and a
TP all_reduce; backward: all_gather, all_reduce and reduce_scatter of its gradient). A fault is
planted at one rank, train step and loop iteration: a skipped collective, a skipped send or
recv, an extra collective, or a collective on the wrong group. `Schedule.toml()` writes the
scenario and `Schedule.planted` says what the report must name: the rank and the call site.
"""

import random


def _rank_expr(offset):
    return f"rank + {offset}" if offset >= 0 else f"rank - {-offset}"


class Schedule:
    def __init__(self, rng, kind=None):
        self.rng = rng
        while True:
            pp = rng.choice([1, 2, 2, 4, 4, 8]) if kind != "fsdp" else 1
            if kind in ("1f1b", "interleaved") and pp == 1:
                continue
            dp = rng.choice([1, 2, 3, 4, 8])
            tp = rng.choice([1, 2, 2, 4])
            if 8 <= pp * dp * tp <= 256 and (pp > 1 or dp > 1):
                break
        self.pp, self.dp, self.tp = pp, dp, tp
        self.world = pp * dp * tp
        self.kind = "1f1b" if pp > 1 else "fsdp"
        self.steps_per_run = rng.choice([1, 2])
        self.microbatches = pp + rng.randrange(0, 4)  # 1F1B needs at least pp
        self.layers = rng.randrange(3, 25)
        # HSDP: the first mesh dim replicates instead of pipelining.
        if kind == "hsdp" or (kind is None and pp > 1 and rng.random() < 0.3):
            self.kind = "hsdp"
        elif kind == "interleaved":
            self.kind = "interleaved"
            self.chunks = rng.choice([2, 2, 3, 4])
            self.microbatches = pp * rng.choice([1, 2, 2, 3])  # a multiple of pp
        self.lines = []  # (text) of the scenario, one TOML line each
        self.sites = []  # candidate fault sites: dict(line, step, loop, kind, count_for(rank))
        self.planted = None

    # --- the mesh and its coordinates ---
    def coords(self, rank):
        tp = rank % self.tp
        dp = (rank // self.tp) % self.dp
        return rank // (self.tp * self.dp), dp, tp

    def emit(self, text):
        self.lines.append(text)
        return len(self.lines)  # 1-based line number of `text`

    def step(self, body, when=None, site=None):
        """A [[step]] whose first line is the step table's header (its location)."""
        line = self.emit("  [[step]]")
        self.emit(f"  {body}")
        if when is not None:
            self.emit(f'  when = "{when}"')
        if site is not None:
            site["line"] = line
            site["when"] = when
            site["body"] = body
            self.sites.append(site)
        return line

    def repeat(self, var, count):
        self.emit("[[step]]")
        self.emit(f'repeat = {{ var = "{var}", count = "{count}" }}')

    def end(self, var):
        self.emit("[[step]]")
        self.emit(f'end_repeat = "{var}"')

    # --- schedules ---
    def build(self):
        self.emit("[scenario]")
        self.emit(f'name = "generated-{self.kind}-{self.pp}x{self.dp}x{self.tp}"')
        self.emit(f"world_size = {self.world}")
        self.emit("")
        self.emit("[[mesh]]")
        self.emit('name = "world"')
        self.emit(f"shape = [{self.pp}, {self.dp}, {self.tp}]")
        first = "rep" if self.kind == "hsdp" else "pp"
        self.emit(f'dims = ["{first}", "dp", "tp"]')
        self.repeat("s", self.steps_per_run)
        if self.kind == "1f1b":
            self.one_f_one_b()
        elif self.kind == "interleaved":
            self.interleaved()
        elif self.kind == "hsdp":
            self.hsdp()
        else:
            self.fsdp()
        self.end("s")
        return self

    def tp_all_reduce(self, loop, count_for, label):
        if self.tp == 1:
            return
        self.step('all_reduce = { tensor = "ones(4)", group = { mesh = "world", dim = "tp" }, '
                  'out = "x" }', site={"op": "all_reduce", "loop": loop, "count_for": count_for,
                                       "group": "tp", "label": label})

    def one_f_one_b(self):
        P, M, K = self.pp, self.microbatches, self.dp * self.tp
        pp = "coord(world, pp)"
        warm = lambda r: P - 1 - self.coords(r)[0]
        steady = lambda r: M - warm(r)
        self.repeat("w", f"{P - 1} - {pp}")
        self.step(f'recv = {{ like = "zeros(2)", src = "{_rank_expr(-K)}", out = "act" }}',
                  f"{pp} > 0",
                  {"op": "recv", "loop": "w", "count_for": warm, "peer": -K,
                   "runs": lambda r: self.coords(r)[0] > 0})
        self.tp_all_reduce("w", warm, "forward")
        self.step(f'send = {{ tensor = "ones(2)", dst = "{_rank_expr(K)}" }}', f"{pp} < {P - 1}",
                  {"op": "send", "loop": "w", "count_for": warm, "peer": K,
                   "runs": lambda r: self.coords(r)[0] < P - 1})
        self.end("w")
        self.step(f'recv = {{ like = "zeros(2)", src = "{_rank_expr(-K)}", out = "act" }}',
                  f"{pp} > 0")
        self.repeat("j", f"{M} - ({P - 1} - {pp})")
        self.tp_all_reduce("j", steady, "forward")
        # Blocking calls pair as Megatron's batched ones do: even stages send first.
        self.step(f'send = {{ tensor = "ones(2)", dst = "{_rank_expr(K)}" }}',
                  f"{pp} < {P - 1} and {pp} % 2 == 0",
                  {"op": "send", "loop": "j", "count_for": steady, "peer": K,
                   "runs": lambda r: self.coords(r)[0] < P - 1 and self.coords(r)[0] % 2 == 0})
        self.step(f'recv = {{ like = "zeros(2)", src = "{_rank_expr(K)}", out = "grad" }}',
                  f"{pp} < {P - 1}",
                  {"op": "recv", "loop": "j", "count_for": steady, "peer": K,
                   "runs": lambda r: self.coords(r)[0] < P - 1})
        self.step(f'send = {{ tensor = "ones(2)", dst = "{_rank_expr(K)}" }}',
                  f"{pp} < {P - 1} and {pp} % 2 == 1",
                  {"op": "send", "loop": "j", "count_for": steady, "peer": K,
                   "runs": lambda r: self.coords(r)[0] < P - 1 and self.coords(r)[0] % 2 == 1})
        self.tp_all_reduce("j", steady, "backward")
        self.step(f'send = {{ tensor = "ones(2)", dst = "{_rank_expr(-K)}" }}',
                  f"{pp} > 0 and {pp} % 2 == 0",
                  {"op": "send", "loop": "j", "count_for": steady, "peer": -K,
                   "runs": lambda r: self.coords(r)[0] > 0 and self.coords(r)[0] % 2 == 0})
        self.step(f'recv = {{ like = "zeros(2)", src = "{_rank_expr(-K)}", out = "act" }}',
                  f"{pp} > 0 and j < {M - 1} - ({P - 1} - {pp})")
        self.step(f'send = {{ tensor = "ones(2)", dst = "{_rank_expr(-K)}" }}',
                  f"{pp} > 0 and {pp} % 2 == 1",
                  {"op": "send", "loop": "j", "count_for": steady, "peer": -K,
                   "runs": lambda r: self.coords(r)[0] > 0 and self.coords(r)[0] % 2 == 1})
        self.end("j")
        self.repeat("c", f"{P - 1} - {pp}")
        self.step(f'recv = {{ like = "zeros(2)", src = "{_rank_expr(K)}", out = "grad" }}', None,
                  {"op": "recv", "loop": "c", "count_for": warm, "peer": K,
                   "runs": lambda r: True})
        self.tp_all_reduce("c", warm, "backward")
        self.step(f'send = {{ tensor = "ones(2)", dst = "{_rank_expr(-K)}" }}', f"{pp} > 0",
                  {"op": "send", "loop": "c", "count_for": warm, "peer": -K,
                   "runs": lambda r: self.coords(r)[0] > 0})
        self.end("c")
        self.dp_gradient_sync()

    def dp_gradient_sync(self):
        """The data-parallel all_reduce of the gradients at the end of a pipeline's train step."""
        if self.dp > 1:
            self.step('all_reduce = { tensor = "ones(2)", op = "avg", group = { mesh = "world", '
                      'dim = "dp" }, out = "g" }',
                      site={"op": "all_reduce", "loop": None, "count_for": lambda r: 1,
                            "group": "dp", "label": "gradient sync"})

    def interleaved(self):
        """Megatron's interleaved 1F1B: each stage holds `chunks` model chunks; virtual microbatch
        i runs chunk (i // pp) % chunks forward (the reverse order backward), so activations of
        the last stage go on to the first stage's next chunk. Every iteration ends in one batched
        exchange with both neighbours, which blocking calls pair as Megatron's batch does: even
        stages talk to the next stage first, odd stages to the previous one."""
        P, V, M, K = self.pp, self.chunks, self.microbatches, self.dp * self.tp
        N, W = M * V, self.world
        pp = "coord(world, pp)"
        stage = lambda r: self.coords(r)[0]
        # All warmup when there are as many microbatches as stages (Megatron's rule).
        warm = (lambda r: N) if M == P else (lambda r: min(N, (P - 1 - stage(r)) * 2 + (V - 1) * P))
        warm_text = f"{N}" if M == P else f"min({N}, ({P - 1} - {pp}) * 2 + {(V - 1) * P})"
        steady = lambda r: N - warm(r)
        chunk_text = lambda i: f"(({i}) // {P}) % {V}"
        chunk = lambda i: (i // P) % V
        nxt, prv = f"(rank + {K}) % {W}", f"(rank + {W - K}) % {W}"

        # (body, when text, peer offset, runs_at(rank, iteration)) of each call.
        def recv_f(i_text, i, extra_text=None, extra=lambda r, k: True):
            return (f'recv = {{ like = "zeros(2)", src = "{prv}", out = "act" }}',
                    f"not ({pp} == 0 and {chunk_text(i_text)} == 0)"
                    + (f" and {extra_text}" if extra_text else ""), -K,
                    lambda r, k: not (stage(r) == 0 and chunk(i(r, k)) == 0) and extra(r, k))

        def send_f(i_text, i):
            return (f'send = {{ tensor = "ones(2)", dst = "{nxt}" }}',
                    f"not ({pp} == {P - 1} and {chunk_text(i_text)} == {V - 1})", K,
                    lambda r, k: not (stage(r) == P - 1 and chunk(i(r, k)) == V - 1))

        def recv_b(i_text, i, extra_text=None, extra=lambda r, k: True):
            return (f'recv = {{ like = "zeros(2)", src = "{nxt}", out = "grad" }}',
                    f"not ({pp} == {P - 1} and {chunk_text(i_text)} == 0)"
                    + (f" and {extra_text}" if extra_text else ""), K,
                    lambda r, k: not (stage(r) == P - 1 and chunk(i(r, k)) == 0) and extra(r, k))

        def send_b(i_text, i):
            return (f'send = {{ tensor = "ones(2)", dst = "{prv}" }}',
                    f"not ({pp} == 0 and {chunk_text(i_text)} == {V - 1})", -K,
                    lambda r, k: not (stage(r) == 0 and chunk(i(r, k)) == V - 1))

        def exchange(loop, count_for, to_next, to_prev):
            for parity, calls in ((0, to_next), (None, to_prev), (1, to_next)):
                for body, when, peer, runs_at in calls:
                    if parity is not None:
                        when = f"({when}) and {pp} % 2 == {parity}"
                        runs_at = (lambda ra, pa: lambda r, k: ra(r, k) and stage(r) % 2 == pa)(
                            runs_at, parity)
                    self.step(body, when, {"op": body.split(" ")[0], "loop": loop,
                                           "count_for": count_for, "peer": peer,
                                           "runs_at": runs_at})

        # (The backward of virtual microbatch i runs chunk V - 1 - chunk(i): its gradient comes
        # from the next stage unless that is the last stage's chunk V - 1, that is chunk(i) == 0.)
        self.step(*recv_f("0", lambda r, k: 0)[:2])
        self.repeat("w", warm_text)
        self.tp_all_reduce("w", warm, "forward")
        exchange("w", warm,
                 [send_f("w", lambda r, k: k),
                  recv_b("0", lambda r, k: 0, f"w == {warm_text} - 1 and {warm_text} < {N}",
                         lambda r, k: k == warm(r) - 1 and warm(r) < N)],
                 [recv_f("w + 1", lambda r, k: k + 1, f"w + 1 < {N}", lambda r, k: k + 1 < N)])
        self.end("w")
        self.repeat("j", f"{N} - {warm_text}")
        self.tp_all_reduce("j", steady, "forward")
        self.tp_all_reduce("j", steady, "backward")
        exchange("j", steady,
                 [send_f(f"{warm_text} + j", lambda r, k: warm(r) + k),
                  recv_b("j + 1", lambda r, k: k + 1, f"j + 1 < {N}", lambda r, k: k + 1 < N)],
                 [recv_f(f"{warm_text} + j + 1", lambda r, k: warm(r) + k + 1,
                         f"{warm_text} + j + 1 < {N}", lambda r, k: warm(r) + k + 1 < N),
                  send_b("j", lambda r, k: k)])
        self.end("j")
        # All warmup: the first backward's gradient comes on its own.
        self.step(*recv_b("0", lambda r, k: 0, f"{warm_text} == {N}")[:2])
        self.repeat("c", warm_text)
        self.tp_all_reduce("c", warm, "backward")
        first = lambda r, k: N - warm(r) + k
        exchange("c", warm,
                 [recv_b(f"{N} - {warm_text} + c + 1", lambda r, k: first(r, k) + 1,
                         f"{N} - {warm_text} + c + 1 < {N}", lambda r, k: first(r, k) + 1 < N)],
                 [send_b(f"{N} - {warm_text} + c", first)])
        self.end("c")
        self.dp_gradient_sync()

    def unshard(self, loop, count_for):
        """FSDP's all-gather of one layer's weights over dp."""
        self.step('all_gather_into_tensor = { tensor = "ones(4)", group = { mesh = "world", '
                  'dim = "dp" }, out = "w" }',
                  site={"op": "all_gather_into_tensor", "loop": loop, "count_for": count_for,
                        "group": "dp", "label": "unshard"})

    def fsdp(self):
        L, D = self.layers, self.dp
        every = lambda r: L
        self.repeat("l", L)
        self.unshard("l", every)
        self.tp_all_reduce("l", every, "forward")
        self.end("l")
        self.repeat("b", L)
        self.unshard("b", every)
        self.tp_all_reduce("b", every, "backward")
        self.step(f'reduce_scatter = {{ tensor = "ones({4 * D})", group = {{ mesh = "world", '
                  f'dim = "dp" }}, out = "g" }}',
                  site={"op": "reduce_scatter", "loop": "b", "count_for": every, "group": "dp",
                        "label": "gradient"})
        self.end("b")

    def collective(self, op, dim, loop, count_for, label, tensor="ones(4)", when=None):
        out = "w" if op == "all_gather_into_tensor" else "g"
        self.step(f'{op} = {{ tensor = "{tensor}", group = {{ mesh = "world", dim = "{dim}" }}, '
                  f'out = "{out}" }}', when,
                  {"op": op, "loop": loop, "count_for": count_for, "group": dim, "label": label})

    def hsdp(self):
        """HSDP (replicate x shard) with TP + sequence parallelism: FSDP prefetches the next
        layer's weights before the current layer runs; each layer all-gathers the sequence over
        tp and reduce-scatters it back; the backward reduce-scatters gradients over dp; replicas
        all-reduce them once per train step."""
        L, D, T = self.layers, self.dp, self.tp
        every = lambda r: L
        prefetching = lambda r: L - 1
        self.collective("all_gather_into_tensor", "dp", None, lambda r: 1, "unshard layer 0")
        self.repeat("l", L)
        self.collective("all_gather_into_tensor", "dp", "l", prefetching, "prefetch",
                        when=f"l < {L - 1}")
        if T > 1:
            self.collective("all_gather_into_tensor", "tp", "l", every, "sequence gather")
            self.collective("reduce_scatter", "tp", "l", every, "sequence scatter",
                            tensor=f"ones({4 * T})")
        self.end("l")
        self.repeat("b", L)
        self.collective("all_gather_into_tensor", "dp", "b", every, "unshard")
        if T > 1:
            self.collective("all_gather_into_tensor", "tp", "b", every, "sequence gather")
            self.collective("reduce_scatter", "tp", "b", every, "sequence scatter",
                            tensor=f"ones({4 * T})")
        self.collective("reduce_scatter", "dp", "b", every, "gradient", tensor=f"ones({4 * D})")
        self.end("b")
        self.step('all_reduce = { tensor = "ones(4)", group = { mesh = "world", dim = "rep" }, '
                  'out = "g" }')

    # --- faults ---
    def plant(self):
        """Plants one fault; False when this schedule offers none of the kind drawn."""
        rng = self.rng
        kind = rng.choice(["skip_collective", "skip_collective", "skip_send", "skip_recv",
                           "extra_collective", "wrong_group"])
        collective = kind in ("skip_collective", "extra_collective", "wrong_group")
        sites = [s for s in self.sites if (s["op"] not in ("send", "recv")) == collective]
        if kind == "skip_send":
            sites = [s for s in sites if s["op"] == "send"]
        if kind == "skip_recv":
            sites = [s for s in sites if s["op"] == "recv"]
        if kind == "wrong_group":
            sites = [s for s in sites if self.tp > 1 and self.dp > 1 and s["group"] in ("tp", "dp")]
        # A collective of one rank completes alone: skipping it is no fault.
        sizes = {"dp": self.dp, "tp": self.tp}
        sites = [s for s in sites if sizes.get(s.get("group"), 2) > 1]
        if not sites:
            return False
        site = rng.choice(sites)
        ranks = [r for r in range(self.world)
                 if site.get("runs", lambda _: True)(r)
                 and site["count_for"](r) * self.steps_per_run >= 3]
        if not ranks:
            return False
        rank = rng.choice(ranks)
        s = rng.randrange(self.steps_per_run)
        loop = site["loop"]
        k = rng.randrange(site["count_for"](rank)) if loop else None
        if "runs_at" in site:
            # Only an iteration where the call is made can lose it.
            made = [i for i in range(site["count_for"](rank)) if site["runs_at"](rank, i)]
            if not made:
                return False
            k = rng.choice(made)
        at = f"rank == {rank} and s == {s}" + (f" and {loop} == {k}" if loop else "")
        iterations = f"s={s}" + (f", {loop}={k}" if loop else "")
        index = self.lines.index("  [[step]]", site["line"] - 1)
        if kind in ("skip_collective", "skip_send", "skip_recv", "wrong_group"):
            when = f"({site['when']}) and not ({at})" if site["when"] else f"not ({at})"
            self._set_when(index, when)
            self.planted = {"kind": kind, "rank": rank,
                            "site": f"line {site['line']} ({iterations})",
                            "sites": [(site["line"], iterations)]}
        if kind in ("extra_collective", "wrong_group"):
            body = site["body"]
            if kind == "wrong_group":
                other = "dp" if site["group"] == "tp" else "tp"
                body = body.replace(f'dim = "{site["group"]}"', f'dim = "{other}"')
            end = index + 2 + (1 if self.lines[index + 2].startswith("  when = ") else 0)
            self.lines[end:end] = ["  [[step]]", f"  {body}", f'  when = "{at}"']
            extra_line = end + 1
            if kind == "extra_collective":
                self.planted = {"kind": kind, "rank": rank,
                                "site": f"line {extra_line} ({iterations})",
                                "sites": [(extra_line, iterations)]}
            else:
                self.planted["sites"].append((extra_line, iterations))
        return True

    def _set_when(self, index, when):
        """Sets the `when` of the step whose header is lines[index] (adding one if it has none)."""
        if index + 2 < len(self.lines) and self.lines[index + 2].startswith("  when = "):
            self.lines[index + 2] = f'  when = "{when}"'
        else:
            self.lines.insert(index + 2, f'  when = "{when}"')
            # Later sites moved one line down.
            for s in self.sites:
                if s["line"] > index + 1:
                    s["line"] += 1

    def toml(self):
        return "\n".join(self.lines) + "\n"


def generate(seed, kind=None):
    """A schedule with one planted fault, or None when the draw offers no fault to plant."""
    schedule = Schedule(random.Random(seed), kind).build()
    return schedule if schedule.plant() else None
