# A one-node Slurm of this test's own (sourced by the job-script tests): munged, slurmctld and
# slurmd with their key, socket, config, state and logs under $1, on ports of their own, so that
# nothing of the machine's is touched; stop_slurm stops exactly the daemons start_slurm started, by
# their pids. The packages come from jobs/install_deps.sh --with-slurm.

# start_slurm DIR: on success, SLURM_CONF is exported and the node is idle; else returns 1, saying why.
start_slurm() {
  slurm_dir="$1"
  mkdir -p "$slurm_dir"/{state,spool,log,munge}
  chmod 700 "$slurm_dir/munge"
  for tool in munged slurmctld slurmd sbatch scontrol squeue sinfo; do
    command -v "$tool" >/dev/null || { echo "slurm: $tool is not installed (jobs/install_deps.sh --with-slurm)"; return 1; }
  done
  # munged refuses keys and sockets others can reach; as root it needs --force.
  dd if=/dev/urandom of="$slurm_dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$slurm_dir/munge/munge.key"
  munged --force --socket="$slurm_dir/munge/socket" --key-file="$slurm_dir/munge/munge.key" \
         --pid-file="$slurm_dir/munge/munged.pid" --log-file="$slurm_dir/log/munged.log" \
         --seed-file="$slurm_dir/munge/seed" || { echo "slurm: munged did not start"; cat "$slurm_dir/log/munged.log"; return 1; }
  local host node port=$((20000 + RANDOM % 20000))
  host="$(hostname -s)"
  getent hosts "$host" >/dev/null || { echo "slurm: the host name $host does not resolve (add '127.0.0.1 $host' to /etc/hosts)"; return 1; }
  node="$(slurmd -C | head -1)"
  cat > "$slurm_dir/slurm.conf" <<CONF
ClusterName=strata-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$slurm_dir/munge/socket
CredType=cred/munge
StateSaveLocation=$slurm_dir/state
SlurmdSpoolDir=$slurm_dir/spool
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd.pid
SlurmctldLogFile=$slurm_dir/log/slurmctld.log
SlurmdLogFile=$slurm_dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmi2
JobRequeue=1
KillWait=10
ReturnToService=2
MailProg=/bin/true
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF="$slurm_dir/slurm.conf"
  slurmctld -f "$SLURM_CONF" || { echo "slurm: slurmctld did not start"; tail -5 "$slurm_dir/log/slurmctld.log"; return 1; }
  slurmd -f "$SLURM_CONF" || { echo "slurm: slurmd did not start"; tail -5 "$slurm_dir/log/slurmd.log"; return 1; }
  for _ in $(seq 60); do
    sinfo -h -o %T 2>/dev/null | grep -q idle && { echo "slurm: node $host idle (ports $port, $((port + 1)))"; return 0; }
    sleep 0.5
  done
  echo "slurm: the node never became idle:"; sinfo 2>&1; tail -5 "$slurm_dir/log/slurmctld.log" "$slurm_dir/log/slurmd.log"
  return 1
}

stop_slurm() {
  [ -n "${slurm_dir:-}" ] || return 0
  local pid
  for f in slurmd.pid slurmctld.pid munge/munged.pid; do
    pid="$(cat "$slurm_dir/$f" 2>/dev/null)" && [ -n "$pid" ] && kill "$pid" 2>/dev/null
  done
  for f in slurmd.pid slurmctld.pid munge/munged.pid; do
    pid="$(cat "$slurm_dir/$f" 2>/dev/null)" || continue
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  return 0
}
