create table if not exists jobs_done (job text primary key, worker text not null);
