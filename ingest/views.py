from django.shortcuts import render

# Create your views here.
