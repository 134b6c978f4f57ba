# skillaudit — `make audit` runs the main job on the bundled demo, `make test` runs the tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
EXTRAS ?= all

.PHONY: install test test-harbor audit audit-skillsbench lint docs bench lock clean

install: $(STAMP)

# The stamp depends on the pins and the project metadata, so editing either reinstalls.
# setup.py builds the C extensions (skillaudit/runs/_scan.c, skillaudit/analysis/_perm.c); editing them rebuilds.
# compileall: an editable install gets the bytecode a regular install has (every command imports it).
$(STAMP): pyproject.toml constraints.txt setup.py skillaudit/runs/_scan.c skillaudit/analysis/_perm.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt torch==2.13.0
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[$(EXTRAS)]"
	$(BIN)/python -m compileall -q skillaudit
	touch $(STAMP)

test: install
	$(BIN)/lint-imports --no-logo --no-cache
	$(BIN)/python -m pytest -q

# The end-to-end Harbor run (real Harbor, Docker, terminus-2, a scripted endpoint) over
# ../shared/data/harbor-mini; ../shared/tools/harbor-local sets Harbor and Docker up on this machine.
HARBOR_LOCAL ?= ../shared/tools/harbor-local
test-harbor: install
	$(HARBOR_LOCAL) setup >/dev/null
	eval "$$($(HARBOR_LOCAL) env)" && SKILLAUDIT_HARBOR_MINI=$(CURDIR)/../shared/data/harbor-mini \
	  $(BIN)/python -m pytest -q -m harbor tests/test_harbor_e2e.py

audit: install
	$(BIN)/skillaudit audit --out skillaudit-report
	@echo "open $(CURDIR)/skillaudit-report/report.html (also report.md, audit.json, skills.csv)"

# The published SkillsBench v1.1 results (imported registry, sample_runs/skillsbench/): the access
# effect of offering each task's skills, per agent, and the task bundles that hurt which agents.
audit-skillsbench: install
	$(BIN)/skillaudit audit sample_runs/skillsbench/registry.jsonl.gz --out skillsbench-report
	@echo "open $(CURDIR)/skillsbench-report/report.html (also report.md, audit.json)"

lint: install
	$(BIN)/ruff check skillaudit tests bench

# docs/cli.md from every command's --help and the rules table of docs/attribution.md (tests/test_docs.py
# fails when either is stale)
docs: install
	$(BIN)/python -c "import sys, skillaudit.cli as c; sys.exit(c.clidoc())" > docs/cli.md
	$(BIN)/python -m skillaudit.decide.policy --update docs/attribution.md

bench: install
	$(BIN)/python bench/run.py $(BENCH_ARGS)
	$(BIN)/python bench/verdicts.py --issue51
	$(BIN)/python bench/verdicts.py --issue52
	PYTHONPATH=. $(BIN)/python bench/bench_agent_logs.py

# Re-resolve and pin every dependency (torch stays on the CPU build that pip finds locally).
lock:
	rm -rf .lockenv && $(PYTHON) -m venv .lockenv
	.lockenv/bin/pip install --quiet torch==2.13.0 -e ".[$(EXTRAS)]"
	(echo "# Exact pins used by 'make install' (pip install -c constraints.txt). Regenerate with 'make lock'."; \
	 .lockenv/bin/pip freeze --exclude-editable | grep -v '^skillaudit' | sort -f) > constraints.txt
	rm -rf .lockenv

clean:
	rm -rf $(VENV) skillaudit-report .pytest_cache
