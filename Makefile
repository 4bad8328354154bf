# The two commands of the README: `make run` and `make test`. Each installs what it needs, idempotently:
# a virtualenv in .venv, the package with its extras (pyspark brings the ZooKeeper server jars), and
# Java when it is missing and apt-get can install it.

VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
EXTRAS  := cli,test,lint,spark,bench

.PHONY: run test mixed lint typecheck check bench chaos soak campaign fuzz sim sim-ci install java maven kafka clients clean compose-test spark-test test-long

install: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --disable-pip-version-check -q -e '.[$(EXTRAS)]'
	touch $(STAMP)

java:
	@command -v java >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "java not found: installing openjdk-17-jre-headless"; \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q openjdk-17-jre-headless; \
	  else \
	    echo "java not found: install a JRE (apt-get install openjdk-17-jre-headless) to run ZooKeeper" >&2; exit 1; \
	  fi; }

# Apache Kafka as the peer (tests/interop): Kafka 3.9's broker, tools and Streams and the newest 4.x
# clients, resolved from Maven Central into .run/kafka/ once (python -m kafkapeer resolve). Not best
# effort: without the jars the interop suite cannot run, so make test stops here.
maven:
	@command -v mvn >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "mvn not found: installing maven"; \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q maven; \
	  else \
	    echo "mvn not found: install Maven (apt-get install maven) to resolve Kafka's jars" >&2; exit 1; \
	  fi; }

kafka: install java maven
	$(PY) -m kafkapeer resolve

# Tools from outside PyPI that tests drive when they are there: kcat, Prometheus and Chromium (Debian,
# as root; the prometheus package brings promtool; headless Chromium renders the audit's HTML page)
# and kafkajs (npm, into .run/js). Best effort: a test whose
# tool is missing is skipped with the reason.
KAFKAJS := .run/js/node_modules/kafkajs/package.json
# quixstreams and faust-streaming pin their own confluent-kafka and aiokafka: a virtualenv of their own.
PYCLIENTS := .run/pyclients/.installed
clients: $(KAFKAJS) $(PYCLIENTS)
	@for package in kcat prometheus chromium; do \
	  command -v $$package >/dev/null 2>&1 && continue; \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$package >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$package >/dev/null 2>&1; } || \
	    echo "$$package could not be installed: its tests will be skipped"; \
	  else echo "$$package not found (apt-get install $$package): its tests will be skipped"; fi; \
	done

$(PYCLIENTS):
	@python3 -m venv .run/pyclients && \
	  .run/pyclients/bin/pip install -q "quixstreams>=3.20,<4" "faust-streaming>=0.11,<1" >/dev/null 2>&1 && \
	  touch $@ || echo "quixstreams and faust-streaming could not be installed: their tests fail in CI"

$(KAFKAJS):
	@mkdir -p .run/js
	@if command -v npm >/dev/null 2>&1; then \
	  npm install --silent --no-audit --no-fund --prefix .run/js kafkajs@2.2.4 >/dev/null 2>&1 || \
	  echo "kafkajs could not be installed: its tests will be skipped"; \
	else echo "npm not found: the kafkajs tests will be skipped"; fi

run: install java $(if $(MONITOR),clients)
	$(PY) -m cluster up --dir .run/cluster --kafka-ports $(if $(SECURE),--secure) $(if $(MONITOR),--monitor)

test: install java clients kafka
	$(PY) -m pytest

# The audit submitted to a real standalone Spark cluster (master and worker from the pyspark
# distribution, on loopback) against a real two-cluster chaos campaign; CI runs it after make test.
spark-test: install java
	$(PY) -m pytest -m spark_cluster tests/pipeline/test_spark_cluster.py

# The long scenarios (tests marked long) whose capability make test covers with a shorter test: the
# netns chaos run with a zombie broker and a ZooKeeper restart, Kafka's verifiable clients through
# faults, Prometheus firing every alert it can be made to, and the two heaviest benchmark smoke runs
# (the audit of a generated directory, Kafka's broker as the anchor). CI runs them after make test.
test-long: install java clients kafka
	$(PY) -m pytest -m long

# The long scenarios of a cluster shared with Apache Kafka 3.9 (tests marked mixed): controlled
# shutdowns and session expiries across implementations, and a chaos run whose controllers are of
# both kinds. make test runs the short one (the hand-over from our controller to Kafka's and back);
# CI runs these after make test.
mixed: install java kafka
	$(PY) -m pytest -m mixed tests/interop tests/chaos

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install
	$(VENV)/bin/mypy

# What CI runs: the habits first (they are quick), then the tests.
check: lint typecheck test

# bench.kafka_anchor measures Apache Kafka 3.9's controller beside ours, so the bench needs Kafka's jars.
bench: install kafka
	$(PY) -m bench.codec
	$(PY) -m bench.zk_read
	$(PY) -m bench.fanout
	$(PY) -m bench.failover
	$(PY) -m bench.controlled_shutdown
	$(PY) -m bench.kafka_anchor
	$(PY) -m bench.control_latency
	$(PY) -m bench.kafka_control_latency
	$(PY) -m bench.broker_apply
	$(PY) -m bench.cleaner_live
	$(PY) -m bench.epoch_confirmation
	$(PY) -m bench.tls
	$(PY) -m bench.produce
	$(PY) -m bench.kafka_throughput
	$(PY) -m bench.groups

# A cluster of its own in .run/chaos, broken for 100 s, then audited (under four minutes in all). As root, every node is in
# a network namespace of its own and the faults include network partitions and ZooKeeper trouble on
# a three-server ensemble; elsewhere, process faults only. `make soak` is the same for 30 minutes.
# The audit runs even when the run's own verdict failed: that is when it is needed most.
ALL_FAULTS   := kill,bounce,restart,pause,isolate,isolate-zookeeper,isolate-controller,isolate-followers,bridge,zookeeper-minority,zookeeper-restart,zookeeper-leader-kill,quorum-loss
CHAOS_S      ?= 100
CHAOS_SEED   ?=
CHAOS_LAYOUT  = $(if $(filter 0,$(shell id -u)),--netns --zookeeper-nodes 3 --faults $(ALL_FAULTS) --overlap 2,)
# KAFKA_BROKERS=N: N Apache Kafka 3.9 brokers beside ours, every daemon at IBP 3.9 (docs/chaos.md).
KAFKA_BROKERS ?= 0
KAFKA_LAYOUT  = $(if $(filter-out 0,$(KAFKA_BROKERS)),--kafka-brokers $(KAFKA_BROKERS),)
CHAOS_ARGS    = --dir .run/chaos --start $(CHAOS_LAYOUT) $(KAFKA_LAYOUT) --duration $(CHAOS_S) --interval 6 $(if $(CHAOS_SEED),--seed $(CHAOS_SEED),)

chaos: install java $(if $(filter-out 0,$(KAFKA_BROKERS)),kafka)
	rm -rf .run/chaos
	status=0; $(PY) -m chaos run $(CHAOS_ARGS) || status=$$?; \
	audit=0; $(PY) -m pipeline audit --dir .run/chaos --html .run/chaos/report.html || audit=$$?; \
	echo "the run, drawn: $(CURDIR)/.run/chaos/report.html"; \
	[ $$audit = 0 ] || exit $$audit; exit $$status

soak: install java
	$(MAKE) chaos CHAOS_S=1800

# Coverage-guided fuzzing (atheris) of the request, record-batch and znode decoders for FUZZ_S
# seconds; crashing inputs land in fuzz/crashers/, which the tests replay. make test runs 8 seconds.
FUZZ_S ?= 300
fuzz: install
	$(PY) -m fuzz --seconds $(FUZZ_S)

# The controller's deterministic simulation (docs/simulation.md): seeds of SIM_STEPS scheduler steps
# for SIM_S seconds on every core, each judged after every step; a failing seed prints its shrunk
# schedule. CI runs sim-ci (60 s); make test runs a few seeds and the planted bugs.
SIM_S     ?= 1800
SIM_STEPS ?= 2000
sim: install
	$(PY) -m controller.sim --budget-s $(SIM_S) --steps $(SIM_STEPS) --trace --json .run/sim.json

sim-ci: install
	$(PY) -m controller.sim --budget-s 60 --steps $(SIM_STEPS) --trace --json .run/sim-ci.json

# RUNS chaos runs of CAMPAIGN_S seconds, each on a fresh cluster with the next seed (from FIRST_SEED);
# the summary, with the worst availability per fault kind, is .run/campaign/campaign.json; then every
# cluster is audited together, with a page across the runs in .run/campaign/report.html.
RUNS       ?= 20
FIRST_SEED ?= 1
CAMPAIGN_S ?= 120
campaign: install java $(if $(filter-out 0,$(KAFKA_BROKERS)),kafka)
	status=0; $(PY) -m chaos campaign --dir .run/campaign --runs $(RUNS) --first-seed $(FIRST_SEED) \
	  --duration $(CAMPAIGN_S) $(CHAOS_LAYOUT) $(KAFKA_LAYOUT) || status=$$?; \
	audit=0; $(PY) -m pipeline audit --dir .run/campaign --html .run/campaign/report.html || audit=$$?; \
	echo "the runs, drawn: $(CURDIR)/.run/campaign/report.html"; \
	[ $$audit = 0 ] || exit $$audit; exit $$status

# docker-compose.yml on a real Docker engine (docs/docker.md): installs and starts the engine as root,
# builds local images (no registry needed; cached in .run/docker), starts the file, produces and
# consumes from the host, kills, pauses and disconnects brokers, and takes everything down again;
# then the secured variant (docker-compose.secure.yml): up, a SASL_SSL round trip, down.
compose-test: install
	$(PY) -m deploy.compose_test
	$(PY) -m deploy.compose_test --secure

clean:
	rm -rf $(VENV) .run .pytest_cache .hypothesis bench/results
