# gkmap: two commands set up a fresh machine.
#   make demo   create .venv, install gkmap, index the demo genome and map the demo reads
#   make test   the same set-up, the oracle tools (samtools, jellyfish, Picard), then the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEMO_REF   := reference/measles_virus_Edmonston_K01711.1.fa
DEMO_READS := reference/measles_Hm2_HiSeq_R1.fastq.gz

.PHONY: demo test venv tools ptx clean bench paper

venv: $(VENV)/.installed

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# Oracle tools are hard requirements of the test suite (CONVENTIONS.md), and g++ runs the kernels as host
# C++ in CI (tests/host_cuda.py): install them from Debian when absent.
# Picard (ValidateSamFile) comes as Debian's picard-tools, without its recommended extras (R, gfortran).
tools:
	@for t in samtools jellyfish g++ PicardCommandLine:picard-tools; do \
	  command -v $${t%%:*} >/dev/null || missing="$$missing $${t##*:}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing from Debian"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

demo: venv
	$(BIN)/gkmap index $(DEMO_REF)
	$(BIN)/gkmap map -o demo.sam $(DEMO_REF) $(DEMO_READS)
	@echo "wrote demo.sam: $$(grep -vc '^@' demo.sam) records"

# Every kernels/*.cu must compile to PTX; CI has nvcc but no GPU.
ptx:
	@if command -v nvcc >/dev/null; then \
	  for f in kernels/*.cu; do [ -e "$$f" ] || continue; \
	    nvcc -ptx -arch=compute_90 -Ikernels -o /dev/null $$f || exit 1; done; \
	  echo "all kernels compile to PTX"; \
	else echo "nvcc not found: skipping the PTX check"; fi

# The suite runs on every core (pytest-xdist; TEST_WORKERS=0 runs it in one process): its tests are independent
# (temporary folders of their own, PID-named temporary files, a kernel cache written by rename), and
# work-stealing evens out the few minute-long oracle tests.
TEST_WORKERS ?= auto
test: venv tools ptx
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal

# Reproduce the GateKeeper-GPU paper's tables and figures (issue #6, docs/paper.md) into paper/.
#   make paper                 every stage not yet cached, then paper/REPORT.md
#   make paper STAGE=power     one stage (sets, filter-accuracy, filter-throughput, end-to-end, power, report)
#   make paper PAPER_FLAGS=--quick   small inputs (the cpu parts in CI time)
paper: venv
	$(BIN)/python scripts/reproduce_paper.py $(if $(STAGE),--stage $(STAGE)) $(PAPER_FLAGS)

clean:
	rm -rf $(VENV) *.egg-info build demo.sam reference/*.gkx
