-- job_submit.lua: plain sbatch jobs in metasched-managed partitions wait for metasched.
--
-- Installed by deploy/devcluster as /etc/slurm/job_submit.lua (next to slurm.conf) and run by
-- slurmctld for every submission and update (slurm.conf: JobSubmitPlugins=lua; Slurm 22.05's
-- job_submit_lua.so, Lua 5.1 on Debian 12). slurmctld re-reads this file when it changes.
--
-- A job submitted by a user to a managed partition is accepted with priority 0 (held: squeue
-- shows it PD with Reason JobHeldAdmin) and marked with the admin comment ADOPT_MARK.
-- metasched's daemon adopts such jobs, orders and places them with its policy and releases
-- each one onto the nodes it chose (scontrol update NodeList=..., scontrol release).
--
-- Why submit_uid 0 is the marker of metasched's own submissions: the daemon runs sbatch as
-- root with --uid/--gid of the job's owner, so the request reaches slurmctld authenticated by
-- MUNGE as uid 0 while the job belongs to the user. submit_uid is the MUNGE-authenticated
-- caller, which no user can choose; a comment, a job name or an environment variable would be
-- the user's to forge. (Root's own plain sbatch is not held either: root is trusted anyway.)
-- The admin comment can only be set by an operator or by this script, so it proves the hold
-- is ours; the hold itself (priority 0) can only be lifted by an operator.
--
-- Keep MANAGED in step with metasched's configuration (serve --managed-partitions).

local MANAGED = { managed = true }
local ADOPT_MARK = "metasched:adopt"
local WAITING = "metasched: waiting for metasched's policy (msqueue / metasched explain say why)"

-- managed_in lists the managed partitions named in a comma-separated partition list.
local function managed_in(partitions)
	local found = {}
	if partitions == nil then
		return found
	end
	for name in string.gmatch(partitions, "[^,]+") do
		if MANAGED[name] then
			table.insert(found, name)
		end
	end
	return found
end

local function count(partitions)
	local n = 0
	if partitions ~= nil then
		for _ in string.gmatch(partitions, "[^,]+") do
			n = n + 1
		end
	end
	return n
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	if submit_uid == 0 then
		return slurm.SUCCESS -- metasched's own sbatch (root with --uid), or root itself
	end
	local managed = managed_in(job_desc.partition)
	if #managed == 0 then
		if job_desc.admin_comment == ADOPT_MARK then
			job_desc.admin_comment = nil -- only this script hands out the mark
		end
		return slurm.SUCCESS
	end
	if count(job_desc.partition) > 1 then
		-- metasched places a job in one partition: a list could let Slurm start it elsewhere
		slurm.log_user("partition %s is managed by metasched: name it alone (-p %s)", managed[1], managed[1])
		return slurm.ERROR
	end
	if job_desc.array_inx ~= nil or job_desc.dependency ~= nil then
		-- metasched adopts single jobs; msbatch gives arrays and dependencies metasched's meaning
		slurm.log_user("partition %s is managed by metasched: submit arrays and --dependency jobs with msbatch",
			managed[1])
		return slurm.ERROR
	end
	job_desc.priority = 0
	job_desc.admin_comment = ADOPT_MARK
	job_desc.comment = WAITING
	return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	if modify_uid == 0 then
		return slurm.SUCCESS -- metasched's scontrol update / release, or root
	end
	if #managed_in(job_desc.partition) > 0 then
		-- moving a job into a managed partition would skip the hold (22.05 drops log_user in
		-- job_modify: the user reads "Access/permission denied", slurmctld.log says why)
		slurm.log_info("job %u: uid %u may not move it into managed partition %s", job_rec.job_id, modify_uid,
			job_desc.partition)
		return slurm.ESLURM_ACCESS_DENIED
	end
	-- job_state carries flags above its low byte; base state 0 is PENDING (Lua 5.1 has no bit ops)
	if job_rec.admin_comment == ADOPT_MARK and job_rec.job_state % 256 == 0 then
		-- metasched adopted the job with this spec; a release or change would go around its policy
		slurm.log_info("job %u waits for metasched: uid %u may only scancel it", job_rec.job_id, modify_uid)
		return slurm.ESLURM_ACCESS_DENIED
	end
	return slurm.SUCCESS
end

slurm.log_info("metasched job_submit.lua loaded (managed partitions and adoption hold)")
return slurm.SUCCESS
