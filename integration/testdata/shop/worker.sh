set -e
while true; do
  job=$(redis-cli -h "$REDIS_HOST" --raw brpop jobs 0 | tail -n 1)
  psql -q -v ON_ERROR_STOP=1 -c "insert into jobs_done values ('$job', '$FLYD_WORKLOAD')"
done
