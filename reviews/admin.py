
# Register your models here.
