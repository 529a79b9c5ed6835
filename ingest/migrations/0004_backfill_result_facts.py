"""Fill the copied facts and derived figures of results stored before those columns existed."""

from django.db import migrations

from ingest.metrics import coefficient_of_variation, derived, memory_gb, price_per_hour


def backfill(apps, schema_editor):
    Result = apps.get_model("ingest", "Result")
    for result in Result.objects.select_related("system", "organization").iterator():
        system = result.system
        description = system.description if isinstance(system.description, dict) else {}
        memory = memory_gb(description.get("host_memory_capacity"))
        if memory is not None and system.number_of_nodes:
            memory *= system.number_of_nodes
        price = price_per_hour(description)
        figures = derived(score=result.score, accelerators=system.accelerator_count, hosts=system.number_of_nodes,
                          host_processors=system.host_processor_count, host_memory_gb=memory,
                          energy_j=result.energy_j, price=price)
        times = list(result.runs.filter(counted=True).values_list("time_to_train_min", flat=True))
        Result.objects.filter(pk=result.pk).update(
            submitter=result.organization.name, system_name=system.name or result.system_slug,
            accelerator_model=system.accelerator_model_name, framework=system.framework,
            category=system.category, system_type=system.system_type, accelerator_count=system.accelerator_count,
            host_count=system.number_of_nodes, host_processor_count=system.host_processor_count,
            host_memory_gb=memory, price_per_hour=price, accelerator_minutes=figures.accelerator_minutes,
            host_minutes=figures.host_minutes, cloud_scale=figures.cloud_scale,
            cloud_scale_minutes=figures.cloud_scale_minutes, energy_kwh=figures.energy_kwh,
            cost_to_train=figures.cost_to_train, runs_cv=coefficient_of_variation(times),
        )


class Migration(migrations.Migration):
    dependencies = [("ingest", "0003_result_facts")]
    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
