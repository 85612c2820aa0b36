# Sourced by demo.sh and bench.sh: start_origin DIR ROOT starts nginx on 127.0.0.1 with its own
# config under DIR, serving ROOT; sets ORIGIN_PORT and ORIGIN_PID. stop_origin stops it.
start_origin() {
  local dir=$1 root=$2 nginx
  nginx=$(command -v nginx || echo /usr/sbin/nginx)
  mkdir -p "$dir/tmp"
  # Each attempt's nginx answers a token of its own: a port another server holds (chosen by
  # someone else meanwhile) answers no such thing, and the attempt moves on.
  local token
  for attempt in $(seq 1 30); do
    ORIGIN_PORT=$(( 20000 + (RANDOM % 20000) ))
    token="vcache-origin-$$-$attempt-$RANDOM"
    cat > "$dir/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 512; }
http {
  log_format ranges '\$request_method \$uri "\$http_range" \$status \$body_bytes_sent';
  access_log $dir/access.log ranges;
  client_body_temp_path $dir/tmp; proxy_temp_path $dir/tmp; fastcgi_temp_path $dir/tmp; uwsgi_temp_path $dir/tmp; scgi_temp_path $dir/tmp;
  types { video/mp4 mp4; }
  default_type application/octet-stream;
  sendfile on;
  keepalive_requests 100000;
  server { listen 127.0.0.1:$ORIGIN_PORT; root $root; location = /.vcache-origin { access_log off; default_type text/plain; return 200 "$token"; }
    # An origin that limits each connection (a CDN's per-connection cap): --connections' workload.
    location /limited/ { limit_rate 20m; alias $root/; } }
}
CONF
    "$nginx" -c "$dir/nginx.conf" -p "$dir" -e "$dir/error.log" &
    ORIGIN_PID=$!
    for _ in $(seq 1 100); do
      kill -0 $ORIGIN_PID 2>/dev/null || break
      if [ "$(curl -s --max-time 2 "http://127.0.0.1:$ORIGIN_PORT/.vcache-origin" 2>/dev/null)" = "$token" ]; then return 0; fi
      sleep 0.05
    done
    kill $ORIGIN_PID 2>/dev/null; wait $ORIGIN_PID 2>/dev/null
  done
  echo "could not start nginx; see $dir/error.log" >&2
  return 1
}

stop_origin() {
  [ -n "${ORIGIN_PID:-}" ] && kill "$ORIGIN_PID" 2>/dev/null && wait "$ORIGIN_PID" 2>/dev/null
  ORIGIN_PID=
}
