
# Create your views here.
